package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/router"
)

// scan consumes p and returns how many bytes are well framed; when that
// is less than len(p), err says what is wrong with the byte that follows.
// The tests' way to frame a stream whole.
func (f *framer) scan(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, _, err := f.next(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestParseInt(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"42", 42, true}, {"-7", -7, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true},
		{"9223372036854775808", 0, false}, {"-9223372036854775809", 0, false},
		{"", 0, false}, {"-", 0, false}, {"+1", 0, false}, {" 1", 0, false},
		{"1.5", 0, false}, {"0x10", 0, false}, {"123456789012345678901", 0, false},
	} {
		got, ok := parseInt([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseInt(%q): got %d, %v, want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParsePeriod(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64 // µs
		err  error
	}{
		{"60", 60e6, nil}, {"1", 1e6, nil}, {"500ms", 500e3, nil}, {"1ms", 1e3, nil},
		{"1.5s", 1.5e6, nil}, {"1s", 1e6, nil}, {"2m", 120e6, nil}, {"1h", 3600e6, nil},
		{"1d", 86400e6, nil}, {"1.5m", 90e6, nil}, {"0.001", 1e3, nil}, {"1.0005s", 1000500, nil},
		{"1.50000000s", 1.5e6, nil}, {"1H", 3600e6, nil}, {"250MS", 250e3, nil},
		{"0", 0, errPeriod}, {"0s", 0, errPeriod}, {"0.5ms", 0, errPeriodShort},
		{"0.0001", 0, errPeriodShort}, {"1.0000005s", 0, errPeriodFine},
		{"", 0, errPeriod}, {"s", 0, errPeriod}, {"ms", 0, errPeriod}, {"1w", 0, errPeriod},
		{"-1s", 0, errPeriod}, {"1.", 0, errPeriod}, {".5s", 0, errPeriod}, {"1..5s", 0, errPeriod},
		{"1xs", 0, errPeriod}, {"1 s", 0, errPeriod}, {"99999999999999999999d", 0, errPeriodLong},
		{"999999999999999999d", 0, errPeriodLong},
	} {
		got, err := parsePeriod([]byte(tt.in))
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("parsePeriod(%q): got %d, %v, want %d, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func FuzzParsePeriod(f *testing.F) {
	for _, s := range []string{"60", "500ms", "1.5s", "1h", "1d", "0.5ms", "1.0000005s", "2m"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		us, err := parsePeriod(b)
		if err != nil {
			if us != 0 {
				t.Fatalf("%q: error %v with period %d", b, err, us)
			}
			return
		}
		if us < 1000 {
			t.Fatalf("%q: accepted %d µs, under 1 ms", b, us)
		}
		// A plain integer is seconds.
		if n, ok := parseInt(b); ok && us != n*1e6 {
			t.Fatalf("%q: got %d µs, want %d s", b, us, n)
		}
	})
}

// The framing lets ordinary commands carry 512 MiB arguments; a bucket's
// key stays within 1 MiB.
func TestBucketKeysAreBounded(t *testing.T) {
	long := bytes.Repeat([]byte("k"), maxKeyLen+1)
	for _, key := range [][]byte{long[:maxKeyLen], long} {
		want := error(nil)
		if len(key) > maxKeyLen {
			want = errKeyLen
		}
		for name, parse := range map[string]func([][]byte) (router.Request, error){
			"THROTTLE": parseThrottle, "CL.THROTTLE": parseCellThrottle, "THROTTLE.RESET": parseReset,
		} {
			if _, err := parse([][]byte{[]byte(name), key, []byte("5"), []byte("1"), []byte("1")}); err != want {
				t.Errorf("%s with a key of %d bytes: got %v, want %v", name, len(key), err, want)
			}
		}
	}
}

func FuzzParseThrottle(f *testing.F) {
	f.Add([]byte("k"), []byte("5"), []byte("1"), []byte("1s"), []byte("1"), true)
	f.Add([]byte("{tag}k"), []byte("1000000"), []byte("1000000"), []byte("1s"), []byte("0"), false)
	f.Add([]byte(""), []byte("1"), []byte("1"), []byte("1d"), []byte("2"), true)
	f.Add([]byte("k"), []byte("15"), []byte("30"), []byte("60"), []byte("-1"), false)
	// The policy forms read the key, the policy's name from capacity's
	// place, and the cost.
	f.Add([]byte("api:free:1"), []byte("free"), []byte("POLICY"), []byte("1s"), []byte("2"), false)
	f.Add([]byte("api:paid:1"), []byte("paid"), []byte("policy"), []byte("1s"), []byte(""), true)
	policies, err := NewPolicies([]Policy{
		{Name: "free", Capacity: 100, Refill: 10, Period: "1s"},
		{Name: "paid", Capacity: 1000, Refill: 100, Period: "1s", Shadow: true},
	}, []KeyRule{{"api:free:*", "free"}, {"api:*", "paid"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key, capacity, refill, period, cost []byte, cell bool) {
		for _, args := range [][][]byte{
			{[]byte("THROTTLE"), key, refill, capacity, cost},
			{[]byte("THROTTLE"), key, refill, capacity},
			{[]byte("THROTTLE"), key, cost},
			{[]byte("THROTTLE"), key},
		} {
			if !byPolicy(args) {
				continue
			}
			req, pol, err := policies.request(args)
			if err != nil {
				continue
			}
			if pol == nil || req.Key != string(key) || req.Cost < 0 || req.Interval != pol.iv {
				t.Fatalf("%q: accepted a bad request %+v by %+v", args, req, pol)
			}
		}
		args := [][]byte{[]byte("THROTTLE"), key, capacity, refill, period, cost}
		parse := parseThrottle
		if cell {
			args[0], parse = []byte("CL.THROTTLE"), parseCellThrottle
			for _, b := range args[2:] {
				// Go's ParseInt in base 10 is Rust's i64 parsing: one
				// optional sign, any zeros, digits, in range.
				want, err := strconv.ParseInt(string(b), 10, 64)
				if got, ok := parseCellInt(b); ok != (err == nil) || ok && got != want {
					t.Fatalf("parseCellInt(%q) = %d, %v; Rust reads %d, %v", b, got, ok, want, err)
				}
			}
		}
		req, err := parse(args)
		if err != nil {
			return
		}
		iv := req.Interval
		if req.Key != string(key) || req.Cost < 0 || iv.Capacity < 1 || iv.U < 1 || iv.V < 1 {
			t.Fatalf("%q: accepted a bad request %+v", args, req)
		}
		// Whatever is accepted can be answered without overflow.
		var w redcon.Writer
		replyThrottle(&w, &req, &router.Result{})
	})
}

func TestFramerIgnoresChunking(t *testing.T) {
	stream := []byte("*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\nPING\r\n*1\r\n$4\r\nPING\r\n*1\r\n$99999999999\r\n")
	whole := newTestFramer()
	n1, err1 := whole.scan(stream)
	bytewise := newTestFramer()
	n2 := 0
	var err2 error
	for i := range stream {
		var k int
		k, err2 = bytewise.scan(stream[i : i+1])
		n2 += k
		if err2 != nil {
			break
		}
	}
	if n1 != n2 || err1 == nil || err2 == nil || err1.Error() != err2.Error() {
		t.Fatalf("whole: %d, %v; byte by byte: %d, %v", n1, err1, n2, err2)
	}
	if want := bytes.Index(stream, []byte("$99999999999")) + len("$99999999999\r"); n1 != want {
		t.Fatalf("error found at byte %d, want %d (the header's newline)", n1, want)
	}
}

func newTestFramer() *framer {
	return &framer{maxBulk: defaultMaxBulkLen, maxArgs: defaultMaxArgs, maxQuery: defaultQueryBufferLimit}
}

// FuzzFramer checks that the framer never panics, that how a stream is cut
// into reads does not change its verdict, and that both serving paths read
// the same commands from it, inline ones split as Redis splits them: an
// event loop's split, and redcon reading through a framedConn. redcon must never refuse what a framedConn hands it.
func FuzzFramer(f *testing.F) {
	f.Add([]byte("*1\r\n$4\r\nPING\r\n"), uint8(3))
	f.Add([]byte("PING\r\nTHROTTLE k 1 1 1\r\n"), uint8(1))
	f.Add([]byte("*3\r\n$8\r\nTHROTTLE\r\n$1\r\nk\r\n$-1\r\n"), uint8(7))
	f.Add([]byte("*99999999999\r\n"), uint8(2))
	f.Add([]byte("*1\r\n$9223372036854775807\r\n"), uint8(5))
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$2\r\nhixx*1\r\n$4\r\nPING\r\n"), uint8(4))
	f.Add([]byte("*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n*-0\r\nPING\r\n"), uint8(2))
	f.Add([]byte("ECHO \"a\\tb\" 'c\\'d' \"\"\r\n  \t \r\nECHO x\"y\r\n"), uint8(6))
	f.Add([]byte("ECHO a\"b c\" \"\\x4a\\x4\"\v\r\nECHO\ta\x00b\r\n\x00\r\n"), uint8(5))
	f.Fuzz(func(t *testing.T, stream []byte, cut uint8) {
		step := int(cut%16) + 1
		sameInSteps(t, newTestFramer(), newTestFramer(), stream, step)
		// Whatever the input, the same bytes sent as a well-formed command
		// within the limits must pass whole.
		if args := bytes.Fields(stream); len(args) > 0 && len(args) <= defaultMaxArgs {
			var w bytes.Buffer
			fmt.Fprintf(&w, "*%d\r\n", len(args))
			for _, a := range args {
				fmt.Fprintf(&w, "$%d\r\n%s\r\n", len(a), a)
			}
			if n, err := newTestFramer().scan(w.Bytes()); err != nil || n != w.Len() {
				t.Fatalf("a well-formed command was refused at %d: %v", n, err)
			}
		}
		loopCmds, loopReply := loopCommands(t, stream, newTestFramer())
		goCmds, goReply := redconCommands(t, stream, step, *newTestFramer())
		if strings.Join(loopCmds, " ") != strings.Join(goCmds, " ") || loopReply != goReply {
			t.Fatalf("a loop reads %q then answers %q; redcon through a framedConn, in reads of %d, reads %q then answers %q",
				loopCmds, loopReply, step, goCmds, goReply)
		}
	})
}

// sdsSplitArgs is Redis 7.0's processInlineBuffer and sdssplitargs, line
// for line, for a whole inline command: the oracle splitInline must match.
func sdsSplitArgs(raw []byte) ([][]byte, bool) {
	line := raw[:len(raw)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	p := func(i int) byte { // a C string
		if i < len(line) && line[i] != 0 {
			return line[i]
		}
		return 0
	}
	isspace := func(c byte) bool { return strings.IndexByte(" \t\n\v\f\r", c) >= 0 && c != 0 }
	hex := func(c byte) int {
		if c >= 'A' && c <= 'F' {
			c += 'a' - 'A'
		}
		return strings.IndexByte("0123456789abcdef", c)
	}
	var argv [][]byte
	i := 0
	for {
		for p(i) != 0 && isspace(p(i)) {
			i++
		}
		if p(i) == 0 {
			return argv, true
		}
		inq, insq, done := false, false, false
		current := []byte{}
		for !done {
			if inq {
				if p(i) == '\\' && p(i+1) == 'x' && p(i+2) != 0 && hex(p(i+2)) >= 0 && p(i+3) != 0 && hex(p(i+3)) >= 0 {
					current = append(current, byte(hex(p(i+2))*16+hex(p(i+3))))
					i += 3
				} else if p(i) == '\\' && p(i+1) != 0 {
					i++
					c := map[byte]byte{'n': '\n', 'r': '\r', 't': '\t', 'b': '\b', 'a': '\a'}[p(i)]
					if c == 0 {
						c = p(i)
					}
					current = append(current, c)
				} else if p(i) == '"' {
					if p(i+1) != 0 && !isspace(p(i+1)) {
						return nil, false
					}
					done = true
				} else if p(i) == 0 {
					return nil, false
				} else {
					current = append(current, p(i))
				}
			} else if insq {
				if p(i) == '\\' && p(i+1) == '\'' {
					i++
					current = append(current, '\'')
				} else if p(i) == '\'' {
					if p(i+1) != 0 && !isspace(p(i+1)) {
						return nil, false
					}
					done = true
				} else if p(i) == 0 {
					return nil, false
				} else {
					current = append(current, p(i))
				}
			} else {
				switch p(i) {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					current = append(current, p(i))
				}
			}
			if p(i) != 0 {
				i++
			}
		}
		argv = append(argv, current)
	}
}

// loopCommands is what an event loop takes from stream, each command's
// arguments quoted, and the protocol error it answers, if any. Each whole
// inline command splits as Redis splits it. f frames it.
func loopCommands(t *testing.T, stream []byte, f *framer) ([]string, string) {
	var cmds []string
	for start, pos := 0, 0; pos < len(stream); {
		k, whole, err := f.next(stream[pos:])
		pos += k
		if err != nil {
			return cmds, string(appendProtocolError(nil, err.Error()))
		}
		if !whole {
			continue
		}
		raw := stream[start:pos]
		start = pos
		var args [][]byte
		ok := true
		switch {
		case raw[0] == '*':
			args = splitArgs(nil, raw)
		case !blank(raw):
			args, ok = splitInline(nil, raw)
		}
		if len(args) == 0 && ok {
			continue // ignored
		}
		if raw[0] != '*' {
			want, wok := sdsSplitArgs(raw)
			if ok != wok || (ok && fmt.Sprintf("%q", args) != fmt.Sprintf("%q", want)) {
				t.Fatalf("%q: split %q, %v; Redis %q, %v", raw, args, ok, want, wok)
			}
		}
		if !ok {
			return cmds, string(appendProtocolError(nil, errUnbalancedQuotes.Error()))
		}
		cmds = append(cmds, fmt.Sprintf("%q", args))
	}
	return cmds, ""
}

// redconCommands is what redcon reads from stream through a framedConn,
// the stream arriving step bytes at a time, and what the framedConn
// answers itself, with the framer f.
func redconCommands(t *testing.T, stream []byte, step int, f framer) ([]string, string) {
	sc := &stepConn{in: stream, step: step}
	rd := redcon.NewReader(&framedConn{Conn: sc, f: f})
	var cmds []string
	for {
		got, err := rd.ReadCommands()
		for _, cmd := range got {
			cmds = append(cmds, fmt.Sprintf("%q", cmd.Args))
		}
		if err != nil {
			if err != io.EOF && !errors.Is(err, errProtocolClosed) {
				t.Fatalf("redcon: %v", err)
			}
			return cmds, sc.out.String()
		}
	}
}

// stepConn is a connection that gives the bytes of in, step at a time, and
// keeps what is written to it.
type stepConn struct {
	net.Conn
	in   []byte
	step int
	out  bytes.Buffer
}

func (c *stepConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.in[:min(c.step, len(c.in))])
	c.in = c.in[n:]
	return n, nil
}

func (c *stepConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// SetWriteDeadline is a no-op: writes to it never block.
func (c *stepConn) SetWriteDeadline(time.Time) error { return nil }

func TestSplitInline(t *testing.T) {
	for _, tt := range []struct {
		line string
		want string // the arguments quoted, or "unbalanced"
	}{
		// As Redis 7.0 splits them (sdssplitargs), each checked against
		// redis-server.
		{"PING\r\n", `["PING"]`},
		{"  ECHO   a  \n", `["ECHO" "a"]`},
		{"ECHO \"a b\" 'c d'\r\n", `["ECHO" "a b" "c d"]`},
		{"ECHO \"a\\n\\r\\t\\\"\\\\\\x\"\r\n", `["ECHO" "a\n\r\t\"\\x"]`},
		{"ECHO 'it\\'s'\r\n", `["ECHO" "it's"]`},
		{"ECHO \"\"\r\n", `["ECHO" ""]`},
		{"ECHO '' \"\"\r\n", `["ECHO" "" ""]`},
		{"ECHO a\tb\r\n", `["ECHO" "a" "b"]`},
		{"ECHO a\rb\r\n", `["ECHO" "a" "b"]`},
		{"ECHO a\vb\f\r\n", `["ECHO" "a\vb\f"]`},
		{"\v\f ECHO x\r\n", `["ECHO" "x"]`},
		{"ECHO a\"b\"\r\n", `["ECHO" "ab"]`},
		{"ECHO a'b'\r\n", `["ECHO" "ab"]`},
		{"ECHO a\"b c\" d\r\n", `["ECHO" "ab c" "d"]`},
		{"ECHO 'x\\ny'\r\n", `["ECHO" "x\\ny"]`},
		{"ECHO \"\\x41\\x4g\\b\\a\"\r\n", `["ECHO" "Ax4g\b\a"]`},
		{"ECHO \"a\"\t\r\n", `["ECHO" "a"]`},
		{"ECHO \"a\\\\\"\r\n", `["ECHO" "a\\"]`},
		{"ECHO a\x00b c\r\n", `["ECHO" "a"]`},
		{"\x00ECHO\r\n", `[]`},
		{"ECHO \"a\r\n", "unbalanced"},
		{"ECHO \"a\"b\r\n", "unbalanced"},
		{"ECHO a\"b c\"d\r\n", "unbalanced"},
		{"ECHO \"a\\\r\n", "unbalanced"},
	} {
		args, ok := splitInline(nil, []byte(tt.line))
		got := fmt.Sprintf("%q", args)
		if !ok {
			got = "unbalanced"
		}
		if got != tt.want {
			t.Errorf("%q: got %s, want %s", tt.line, got, tt.want)
		}
	}
}

// A 64 KiB inline line of one-letter arguments: redcon's own parser
// allocates about 1 GiB for it.
func BenchmarkSplitInline(b *testing.B) {
	line := []byte(strings.Repeat("a ", maxInline/2-1) + "\r\n")
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	var argv [][]byte
	for b.Loop() {
		argv, _ = splitInline(argv[:0], line)
	}
}

func BenchmarkParseAndReply(b *testing.B) {
	args := [][]byte{[]byte("THROTTLE"), []byte("user:12345"), []byte("100"), []byte("10"), []byte("1s"), []byte("1")}
	w := redcon.NewWriter(io.Discard)
	// As in serveRESP: requests and results live in per-client slices.
	reqs, res := make([]router.Request, 1), make([]router.Result, 1)
	res[0].RetryAfter = -1
	b.ReportAllocs()
	for b.Loop() {
		cmd, err := lookup(args)
		if err != nil {
			b.Fatal(err)
		}
		if reqs[0], err = cmd.request(args); err != nil {
			b.Fatal(err)
		}
		cmd.reply(w, &reqs[0], &res[0])
		w.Flush()
	}
}

// Rust's i64 parsing takes any number of leading zeros, so redis-cell
// reads a zero-padded number past 20 bytes as its value.
func TestCellThrottleTakesLongZeroPadding(t *testing.T) {
	pad := strings.Repeat("0", 30)
	want, err := parseCellThrottle(bytes.Fields([]byte("CL.THROTTLE k 15 30 60 0")))
	if err != nil {
		t.Fatal(err)
	}
	line := "CL.THROTTLE k " + pad + "15 +" + pad + "30 " + pad + "60 -" + pad
	if got, err := parseCellThrottle(bytes.Fields([]byte(line))); err != nil || got != want {
		t.Errorf("%s: got %+v, %v, want %+v", line, got, err, want)
	}
	for _, bad := range []string{pad + "9223372036854775808", "+-" + pad + "1", "-+" + pad + "1"} {
		if _, err := parseCellThrottle(bytes.Fields([]byte("CL.THROTTLE k 15 30 60 " + bad))); err == nil {
			t.Errorf("quantity %s: accepted", bad)
		}
	}
}

// redis-cell reads its numbers with Rust's i64 parsing, which takes a
// leading '+': CL.THROTTLE k +15 +30 +60 +2 is CL.THROTTLE k 15 30 60 2.
func TestCellThrottleTakesPlus(t *testing.T) {
	line := func(s string) [][]byte {
		var args [][]byte
		for _, f := range strings.Fields(s) {
			args = append(args, []byte(f))
		}
		return args
	}
	want, err := parseCellThrottle(line("CL.THROTTLE k 15 30 60 2"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := parseCellThrottle(line("CL.THROTTLE k +15 +30 +60 +2")); err != nil || got != want {
		t.Errorf("with '+': got %+v, %v, want %+v", got, err, want)
	}
	for _, bad := range []string{"CL.THROTTLE k + 30 60", "CL.THROTTLE k +-15 30 60", "CL.THROTTLE k ++15 30 60", "CL.THROTTLE k 15 30 60 +-1"} {
		if _, err := parseCellThrottle(line(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// sameInSteps checks that b, fed stream in reads of step bytes, frames
// as much of it as a does in one read, and fails alike.
func sameInSteps(t *testing.T, a, b *framer, stream []byte, step int) {
	t.Helper()
	na, ea := a.scan(stream)
	nb := 0
	var eb error
	for i := 0; i < len(stream) && eb == nil; i += step {
		var k int
		k, eb = b.scan(stream[i:min(i+step, len(stream))])
		nb += k
	}
	if na != nb || (ea == nil) != (eb == nil) {
		t.Fatalf("one read: %d, %v; reads of %d: %d, %v", na, ea, step, nb, eb)
	}
}
