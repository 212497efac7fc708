package lua

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
)

// command reads one RESP command (an array of bulk strings) back.
func command(t testing.TB, b []byte) []string {
	t.Helper()
	fail := func() []string { t.Fatalf("not one RESP command: %q", b); return nil }
	line := func() string {
		i := bytes.Index(b, []byte("\r\n"))
		if i < 0 {
			fail()
		}
		l := string(b[:i])
		b = b[i+2:]
		return l
	}
	h := line()
	if h[0] != '*' {
		fail()
	}
	n, _ := strconv.Atoi(h[1:])
	var args []string
	for range n {
		h := line()
		size, err := strconv.Atoi(strings.TrimPrefix(h, "$"))
		if err != nil || !strings.HasPrefix(h, "$") || len(b) < size+2 {
			fail()
		}
		args = append(args, string(b[:size]))
		b = b[size+2:]
	}
	if len(b) != 0 {
		fail()
	}
	return args
}

var testCalls = []Call{
	{Key: "a", Interval: bucket.Interval{Capacity: 10, U: 100_000, V: 1}, Cost: 1},
	{Key: "{b}c", Interval: bucket.Interval{Capacity: 5, U: 1, V: 3}, Cost: 0, Base: "1733000000000000123"},
	{Key: "d", Interval: bucket.Interval{Capacity: 7, U: 60_000_000, V: 7}, Cost: 2, N: 4},
	{Key: "", Interval: bucket.Interval{Capacity: 1 << 40, U: 2, V: 1 << 40}, Cost: -1, N: -3, Base: "0"},
}

func TestAppendOneIsDosCall(t *testing.T) {
	th := NewThrottle()
	for _, c := range append(testCalls, Call{Key: "now", Interval: testCalls[0].Interval, Cost: 1, Now: 1_733_000_000_000_000}) {
		want := append([]string{"EVALSHA", th.sha1, "1", c.Key}, c.args()...)
		if got := command(t, th.AppendOne([]byte("keep"), c)[4:]); !slices.Equal(got, want) {
			t.Errorf("%+v: AppendOne sends %q, want %q", c, got, want)
		}
		want[0], want[1] = "EVAL", throttleSrc
		if got := command(t, th.AppendOneEval(nil, c)); !slices.Equal(got, want) {
			t.Errorf("%+v: AppendOneEval sends %q, want %q", c, got, want)
		}
	}
}

func TestAppendManyIsDoManysCall(t *testing.T) {
	th := NewThrottle()
	withNow := append(slices.Clone(testCalls), Call{Key: "now", Interval: testCalls[0].Interval, Cost: 1, Now: 1_733_000_000_000_000})
	for _, calls := range [][]Call{nil, testCalls[:1], testCalls, withNow} {
		want := append([]string{"EVALSHA", th.sha1, "0"}, manyArgs(calls)...)
		if got := command(t, th.AppendMany(nil, calls)); !slices.Equal(got, want) {
			t.Errorf("AppendMany sends %q, want %q", got, want)
		}
		want[0], want[1] = "EVAL", throttleSrc
		if got := command(t, th.AppendManyEval(nil, calls)); !slices.Equal(got, want) {
			t.Errorf("AppendManyEval sends %q, want %q", got, want)
		}
	}
	// The layout the script reads: 7 ARGV a bucket, 8 with a clock.
	got := manyArgs(testCalls[2:3])
	if want := []string{"7", "d", "7", "60000000", "7", "2", "", "4"}; !slices.Equal(got, want) {
		t.Errorf("manyArgs = %q, want %q", got, want)
	}
	if got := manyArgs(withNow[4:]); len(got) != 9 || got[0] != "8" || got[8] != "1733000000000000" {
		t.Errorf("manyArgs with a clock = %q", got)
	}
}

func TestAppendAllocatesNothing(t *testing.T) {
	th := NewThrottle()
	calls := benchCalls(64)
	buf := make([]byte, 0, 1<<16)
	if n := testing.AllocsPerRun(100, func() { buf = th.AppendMany(buf[:0], calls) }); n != 0 {
		t.Errorf("AppendMany: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { buf = th.AppendOne(buf[:0], calls[0]) }); n != 0 {
		t.Errorf("AppendOne: %v allocations", n)
	}
}

const marker = "~1733000000000000123:1733000060000:1733000060000000000:18c3f2a9b10:a,b"

// manyReply is the reply of a many call of these buckets' values.
func manyReply(values ...[5]string) []byte {
	b := []byte("*" + strconv.Itoa(5*len(values)) + "\r\n")
	for _, v := range values {
		for _, s := range v {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				b = append(b, ":"+strconv.FormatInt(n, 10)+"\r\n"...)
			} else {
				b = append(b, "$"+strconv.Itoa(len(s))+"\r\n"+s+"\r\n"...)
			}
		}
	}
	return b
}

func TestDecodeMany(t *testing.T) {
	reply := manyReply(
		[5]string{"0", "9", "-1", "100000", "1"},
		[5]string{"1", "0", "250", "1000000", "3"},
		[5]string{"2", marker, "59000", "0", "0"},
		[5]string{"3", "WRONGTYPE key holds a value that is not a sluice bucket", "0", "0", "0"},
		[5]string{"3", "ERR Script attempted to access a non local key in a cluster node", "0", "0", "0"},
		[5]string{"3", "ERR Script attempted to execute a command while the cluster is down", "0", "0", "0"},
	)
	out := make([]Outcome, 6)
	// Every prefix is not a reply yet; the reply is, and the next one's
	// bytes stay.
	for k := range len(reply) {
		if n, err := DecodeMany(reply[:k], out); n != 0 || err != nil {
			t.Fatalf("prefix of %d bytes: n=%d, err=%v; want 0, nil", k, n, err)
		}
	}
	n, err := DecodeMany(append(slices.Clip(reply), "*0\r\n"...), out)
	if n != len(reply) || err != nil {
		t.Fatalf("n=%d, err=%v; want %d, nil", n, err, len(reply))
	}
	if want := (Outcome{Result: bucket.Result{Remaining: 9, RetryAfter: -1, ResetAfter: 100_000}, Taken: 1}); out[0] != want {
		t.Errorf("bucket 0: %+v, want %+v", out[0], want)
	}
	if want := (Outcome{Result: bucket.Result{Limited: true, RetryAfter: 250, ResetAfter: 1_000_000}, Taken: 3}); out[1] != want {
		t.Errorf("bucket 1: %+v, want %+v", out[1], want)
	}
	var se *SplitError
	if !errors.As(out[2].Err, &se) || se.Split.Gen != "18c3f2a9b10" || se.Split.TTL != 59*time.Second || !slices.Equal(se.Split.Tags, []string{"a", "b"}) {
		t.Errorf("bucket 2: %+v, want the split", out[2])
	}
	for k, is := range []func(*Error) bool{(*Error).IsWrongType, (*Error).IsNotLocal, (*Error).IsClusterDown} {
		var e *Error
		if !errors.As(out[3+k].Err, &e) || !is(e) || out[3+k].Result != (bucket.Result{}) {
			t.Errorf("bucket %d: %+v, want its error", 3+k, out[3+k])
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		reply string
		n     int // 0: the whole reply
		check func(*Error) bool
		shape bool // a reply of the wrong shape
	}{
		{reply: "-NOSCRIPT No matching script. Please use EVAL.\r\n", check: (*Error).IsNoScript},
		{reply: "-MOVED 3999 127.0.0.1:6381\r\n", check: func(e *Error) bool { a, ok := e.IsMoved(); return ok && a == "127.0.0.1:6381" }},
		{reply: "-ASK 3999 127.0.0.1:6381\r\n", check: func(e *Error) bool { a, ok := e.IsAsk(); return ok && a == "127.0.0.1:6381" }},
		{reply: "-CLUSTERDOWN The cluster is down\r\n", check: (*Error).IsClusterDown},
		{reply: "-BUSY Redis is busy running a script.\r\n", check: (*Error).IsBusy},
		{reply: "-LOADING Redis is loading the dataset in memory\r\n", check: (*Error).IsLoading},
		{reply: "-TRYAGAIN Multiple keys request during rehashing of slot\r\n", check: (*Error).IsTryAgain},
		{reply: "!21\r\nWRONGTYPE in RESP3\r\nx\r\n", check: (*Error).IsWrongType},
		{reply: "*1\r\n:0\r\n", shape: true},
		{reply: "+OK\r\n", shape: true},
		{reply: "*5\r\n:0\r\n:1\r\n:2\r\n$1\r\nx\r\n:4\r\n", shape: true},
		{reply: "*5\r\n:4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", shape: true},
		{reply: "*5\r\n:2\r\n:1\r\n:2\r\n:3\r\n:4\r\n", shape: true},
		{reply: "*5\r\n*1\r\n:0\r\n:1\r\n:2\r\n:3\r\n:4\r\n", shape: true},
		{reply: "*-1\r\n", shape: true},
		{reply: "$-1\r\n", shape: true},
		{reply: "_\r\n", shape: true},
	} {
		out := []Outcome{{Taken: 7}}
		n, err := DecodeMany([]byte(tc.reply), out)
		var e *Error
		switch {
		case n != len(tc.reply):
			t.Errorf("%q: n=%d, want %d", tc.reply, n, len(tc.reply))
		case tc.shape && (err == nil || errors.As(err, &e)):
			t.Errorf("%q: err %v, want one of shape", tc.reply, err)
		case !tc.shape && (!errors.As(err, &e) || !tc.check(e)):
			t.Errorf("%q: err %#v, want it classified", tc.reply, err)
		case out[0].Err != err:
			t.Errorf("%q: out %+v, want the error", tc.reply, out[0])
		}
	}
	for _, bad := range []string{"?\r\n", ":12a\r\n", "$3\r\nabcd\r\n", ":1\rx", "$-2\r\n", "!-1\r\n", ":99999999999999999999\r\n", "_x\r\n", "*1\r\n%0\r\n"} {
		if n, err := DecodeMany([]byte(bad), nil); n != 0 || !errors.Is(err, ErrProtocol) {
			t.Errorf("%q: n=%d, err=%v; want 0, ErrProtocol", bad, n, err)
		}
	}
}

func TestDecodeOne(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  Outcome
	}{
		{"*4\r\n:0\r\n:4\r\n:-1\r\n:1000000\r\n", Outcome{Result: bucket.Result{Remaining: 4, RetryAfter: -1, ResetAfter: 1_000_000}, Taken: 1}},
		{"*4\r\n:1\r\n:0\r\n:5\r\n:9\r\n", Outcome{Result: bucket.Result{Limited: true, RetryAfter: 5, ResetAfter: 9}}},
		{"*5\r\n:1\r\n:0\r\n:5\r\n:9\r\n:3\r\n", Outcome{Result: bucket.Result{Limited: true, RetryAfter: 5, ResetAfter: 9}, Taken: 3}},
	} {
		var out Outcome
		if n, err := DecodeOne([]byte(tc.reply+"*4\r\n"), &out); n != len(tc.reply) || err != nil || out != tc.want {
			t.Errorf("%q: %d, %v, %+v; want %+v", tc.reply, n, err, out, tc.want)
		}
	}
	split := "*3\r\n:2\r\n$" + strconv.Itoa(len(marker)) + "\r\n" + marker + "\r\n:1500\r\n"
	var out Outcome
	var se *SplitError
	if n, err := DecodeOne([]byte(split), &out); n != len(split) || err != nil || !errors.As(out.Err, &se) || se.Split.TTL != 1500*time.Millisecond {
		t.Errorf("split: %d, %v, %+v", n, err, out)
	}
	wrong := "-WRONGTYPE key holds a value that is not a sluice bucket\r\n"
	var e *Error
	if n, err := DecodeOne([]byte(wrong), &out); n != len(wrong) || !errors.As(err, &e) || !e.IsWrongType() || out.Err != err {
		t.Errorf("WRONGTYPE: %d, %v, %+v", n, err, out)
	}
	if n, err := DecodeOne([]byte("*4\r\n:0\r\n"), &out); n != 0 || err != nil {
		t.Errorf("half a reply: %d, %v", n, err)
	}
}

func TestDecodeAllocatesNothing(t *testing.T) {
	reply, out := benchReply(64)
	if n := testing.AllocsPerRun(100, func() { DecodeMany(reply, out) }); n != 0 {
		t.Errorf("DecodeMany: %v allocations", n)
	}
	var one Outcome
	single := []byte("*4\r\n:0\r\n:4\r\n:-1\r\n:1000000\r\n")
	if n := testing.AllocsPerRun(100, func() { DecodeOne(single, &one) }); n != 0 {
		t.Errorf("DecodeOne: %v allocations", n)
	}
}

// FuzzDecodeMany: no bytes make the decoders panic; a reply is consumed
// whole or not at all, and exactly.
func FuzzDecodeMany(f *testing.F) {
	reply, _ := benchReply(3)
	f.Add(reply)
	f.Add(manyReply([5]string{"2", marker, "59000", "0", "0"}, [5]string{"3", "WRONGTYPE x", "0", "0", "0"}))
	f.Add([]byte("-NOSCRIPT No matching script. Please use EVAL.\r\n"))
	f.Add([]byte("*4\r\n:0\r\n:4\r\n:-1\r\n:1000000\r\n*0\r\n"))
	f.Add([]byte("!3\r\nERR\r\n"))
	f.Add([]byte("*2\r\n$-1\r\n_\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var one Outcome
		many := make([]Outcome, 3)
		n, err := DecodeMany(b, many)
		n1, err1 := DecodeOne(b, &one)
		want, whole := refLen(b)
		switch {
		case n != n1 || (n == 0) != (n1 == 0) || errors.Is(err, ErrProtocol) != errors.Is(err1, ErrProtocol):
			t.Fatalf("DecodeMany: %d, %v; DecodeOne: %d, %v", n, err, n1, err1)
		case whole && n != want:
			t.Fatalf("a whole reply of %d bytes: n=%d, err=%v", want, n, err)
		case !whole && (n != 0 || (want == 0) != (err == nil)):
			t.Fatalf("no whole reply (%d): n=%d, err=%v", want, n, err)
		case n == 0:
			return
		}
		for k := range n {
			if m, err := DecodeMany(b[:k], many); m != 0 || err != nil {
				t.Fatalf("the first %d bytes of a %d-byte reply: %d, %v", k, n, m, err)
			}
		}
		// As many buckets as the reply has, to reach their answers.
		head, _, _ := strings.Cut(string(b[:n]), "\r\n")
		if count, err := strconv.Atoi(strings.TrimPrefix(head, "*")); err == nil && head[0] == '*' && count%5 == 0 && count <= 5000 {
			if m, _ := DecodeMany(b, make([]Outcome, count/5)); m != n {
				t.Fatalf("for %d buckets: n=%d, want %d", count/5, m, n)
			}
		}
	})
}

// refLen is the length of the whole RESP reply at the start of b, read
// another way than replyLen: whole is false and n is 0 for a truncated
// one, -1 for bytes that are none.
func refLen(b []byte) (n int, whole bool) {
	s := string(b)
	var value func(i int) (int, bool)
	value = func(i int) (int, bool) {
		if i >= len(s) {
			return 0, false
		}
		kind := s[i]
		if !strings.ContainsRune("+-_:$!*", rune(kind)) {
			return -1, false
		}
		end := strings.IndexAny(s[i+1:], "\r\n")
		switch {
		case end < 0 || (s[i+1+end] == '\r' && i+1+end == len(s)-1):
			return 0, false
		case s[i+1+end] == '\n' || s[i+1+end+1] != '\n':
			return -1, false
		}
		line, next := s[i+1:i+1+end], i+1+end+2
		num, err := strconv.ParseInt(line, 10, 64)
		switch {
		case kind == '+' || kind == '-':
			return next, true
		case kind == '_':
			if line != "" {
				return -1, false
			}
			return next, true
		case err != nil || strings.HasPrefix(line, "+") || len(strings.TrimPrefix(line, "-")) > 19:
			return -1, false
		case kind == ':':
			return next, true
		case kind == '*':
			if num < -1 {
				return -1, false
			}
			for range num {
				m, ok := value(next)
				if !ok {
					return m, false
				}
				next = m
			}
			return next, true
		}
		// A bulk string or error.
		if num < -1 || (num == -1 && kind == '!') {
			return -1, false
		}
		if num == -1 {
			return next, true
		}
		if int64(len(s)-next) < num+2 {
			return 0, false
		}
		if s[next+int(num):next+int(num)+2] != "\r\n" {
			return -1, false
		}
		return next + int(num) + 2, true
	}
	return value(0)
}

// benchCalls are n steps of one limit on keys of their own.
func benchCalls(n int) []Call {
	calls := make([]Call, n)
	for i := range calls {
		calls[i] = Call{Key: "sluice:user:" + strconv.Itoa(100000+i), Interval: bucket.Interval{Capacity: 100, U: 100_000, V: 1}, Cost: 1}
	}
	return calls
}

// benchReply is a many reply of n decided buckets and room for it.
func benchReply(n int) ([]byte, []Outcome) {
	v := make([][5]string, n)
	for i := range v {
		v[i] = [5]string{"0", "99", "-1", "100000", "1"}
	}
	return manyReply(v...), make([]Outcome, n)
}

func BenchmarkAppendMany(b *testing.B) {
	th := NewThrottle()
	calls := benchCalls(64)
	buf := th.AppendMany(nil, calls)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = th.AppendMany(buf[:0], calls)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(calls)), "ns/bucket")
}

func BenchmarkAppendOne(b *testing.B) {
	th := NewThrottle()
	call := benchCalls(1)[0]
	buf := th.AppendOne(nil, call)
	b.ReportAllocs()
	for b.Loop() {
		buf = th.AppendOne(buf[:0], call)
	}
}

func BenchmarkDecodeMany(b *testing.B) {
	reply, out := benchReply(64)
	b.ReportAllocs()
	b.SetBytes(int64(len(reply)))
	for b.Loop() {
		if _, err := DecodeMany(reply, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(out)), "ns/bucket")
}

func BenchmarkDecodeOne(b *testing.B) {
	reply := []byte("*4\r\n:0\r\n:99\r\n:-1\r\n:100000\r\n")
	var out Outcome
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeOne(reply, &out); err != nil {
			b.Fatal(err)
		}
	}
}
