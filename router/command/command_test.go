package command

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// The fixtures are the raw replies of redis-server 7.0.15 to
//
//	COMMAND INFO <fixtureNames>
//
// over RESP3 (after HELLO 3) and RESP2, read from a plain socket. The test
// against a live server compares them with its answer when it runs 7.0.
var fixtureNames = strings.Fields("get set mset eval fcall zunionstore xread xreadgroup georadius sort migrate spublish object lmpop nosuchcommand")

const fixtureVersion = "7.0."

// message reads one RESP2 or RESP3 reply from b. rueidis keeps its reader
// to itself, but its cache format is the RESP type byte, a length and the
// payload, so a reply converts to it directly.
func message(b []byte) (rueidis.RedisMessage, []byte, error) {
	var m rueidis.RedisMessage
	enc, rest, err := convert(make([]byte, 7), b, 0) // 7 bytes of cache TTL
	if err != nil {
		return m, nil, err
	}
	return m, rest, m.CacheUnmarshalView(enc)
}

func convert(out, b []byte, depth int) ([]byte, []byte, error) {
	line, rest, ok := bytes.Cut(b, []byte("\r\n"))
	if !ok || len(line) == 0 || depth > 16 {
		return nil, nil, errors.New("malformed RESP")
	}
	typ, body := line[0], line[1:]
	null := append(out, '_', 0, 0, 0, 0, 0, 0, 0, 0)
	switch typ {
	case '+', '-', ',', '(':
		out = binary.BigEndian.AppendUint64(append(out, typ), uint64(len(body)))
		return append(out, body...), rest, nil
	case ':':
		n, err := strconv.ParseInt(string(body), 10, 64)
		return binary.BigEndian.AppendUint64(append(out, typ), uint64(n)), rest, err
	case '#':
		v := uint64(0)
		if string(body) == "t" {
			v = 1
		}
		return binary.BigEndian.AppendUint64(append(out, typ), v), rest, nil
	case '_':
		return null, rest, nil
	}
	n, err := strconv.Atoi(string(body))
	if err != nil {
		return nil, nil, err
	}
	if n < 0 {
		return null, rest, nil // RESP2's null bulk string or array
	}
	switch typ {
	case '$', '=', '!':
		if n > len(rest)-2 || string(rest[n:n+2]) != "\r\n" {
			return nil, nil, errors.New("malformed RESP bulk string")
		}
		out = binary.BigEndian.AppendUint64(append(out, typ), uint64(n))
		return append(out, rest[:n]...), rest[n+2:], nil
	case '*', '~', '>', '%':
		if typ == '%' {
			n *= 2 // rueidis holds a map as its keys and values in a row
		}
		if n > len(rest) {
			return nil, nil, errors.New("malformed RESP aggregate")
		}
		out = binary.BigEndian.AppendUint64(append(out, typ), uint64(n))
		for range n {
			if out, rest, err = convert(out, rest, depth+1); err != nil {
				return nil, nil, err
			}
		}
		return out, rest, nil
	}
	return nil, nil, fmt.Errorf("RESP type %q", typ)
}

func fixture(t testing.TB, resp string) map[string]*Spec {
	t.Helper()
	b, err := os.ReadFile("testdata/command-info." + resp)
	if err != nil {
		t.Fatal(err)
	}
	m, rest, err := message(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("reading %s fixture: %v, %d bytes left", resp, err, len(rest))
	}
	specs, err := Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	return specs
}

func TestParseFixture(t *testing.T) {
	specs := fixture(t, "resp3")
	if resp2 := fixture(t, "resp2"); !reflect.DeepEqual(specs, resp2) {
		t.Errorf("RESP2 and RESP3 replies parse differently")
	}
	if len(specs) != len(fixtureNames)-1 || specs["nosuchcommand"] != nil {
		t.Errorf("got %d specs, want %d (all but nosuchcommand)", len(specs), len(fixtureNames)-1)
	}
	eval := specs["eval"]
	wantEval := &Spec{
		Name: "eval", Arity: -3,
		Flags:      []string{"noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"},
		Categories: []string{"slow", "scripting"},
		KeySpecs: []KeySpec{{
			Flags:       []string{"RW", "access", "update"},
			BeginSearch: "index", Index: 2,
			FindKeys: "keynum", KeyNumIdx: 0, FirstKey: 1, KeyStep: 1,
		}},
	}
	if !reflect.DeepEqual(eval, wantEval) {
		t.Errorf("eval: got %+v, want %+v", eval, wantEval)
	}
	xread := specs["xread"].KeySpecs[0]
	if xread.BeginSearch != "keyword" || xread.Keyword != "STREAMS" || xread.StartFrom != 1 ||
		xread.FindKeys != "range" || xread.LastKey != -1 || xread.Limit != 2 {
		t.Errorf("xread: got %+v", xread)
	}
	enc := specs["object"].Subcommands["encoding"]
	if enc == nil || enc.Name != "object|encoding" || enc.Arity != 3 || !enc.Has("readonly") {
		t.Errorf("object|encoding: got %+v", enc)
	}
	if specs["get"].Subcommands != nil {
		t.Errorf("get has subcommands %v", specs["get"].Subcommands)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, resp := range []string{
		"+OK\r\n", // not an array
		"*1\r\n*6\r\n$3\r\nget\r\n:2\r\n*0\r\n:1\r\n:1\r\n:1\r\n",                                                     // Redis 6's six fields
		"*1\r\n*10\r\n$3\r\nget\r\n$1\r\nx\r\n*0\r\n:1\r\n:1\r\n:1\r\n*0\r\n*0\r\n*0\r\n*0\r\n",                       // arity not a number
		"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*0\r\n:1\r\n:1\r\n:1\r\n*0\r\n*0\r\n*1\r\n%1\r\n$5\r\nflags\r\n*0\r\n*0\r\n", // no begin_search
	} {
		m, _, err := message([]byte(resp))
		if err != nil {
			t.Fatal(err)
		}
		if specs, err := Parse(m); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", resp, specs)
		}
	}
}

// keyCase is a command line, the positions of its keys or Keys's error,
// and, when Keys finds the line malformed, the error Redis 7.0 answers when
// running it.
type keyCase struct {
	args []string
	want []int
	err  error
	run  string // for ErrBadKeys: the reply of running the line
}

var keyCases = []keyCase{
	{args: strings.Fields("GET k"), want: []int{1}},
	{args: strings.Fields("get k"), want: []int{1}},
	{args: strings.Fields("SET k v"), want: []int{1}},
	{args: strings.Fields("SET k v NX GET EX 10"), want: []int{1}}, // variable_flags
	{args: strings.Fields("MSET a 1 b 2"), want: []int{1, 3}},
	// Keys are where the spec says, though MSET will refuse the line.
	{args: strings.Fields("MSET a 1 b"), want: []int{1, 3}},
	{args: strings.Fields("MGET a b c"), want: []int{1, 2, 3}},
	{args: strings.Fields("DEL a b"), want: []int{1, 2}},
	{args: strings.Fields("EVAL s 0"), want: nil},
	{args: strings.Fields("EVAL s 0 x y"), want: nil},
	{args: strings.Fields("EVAL s 2 a b x y"), want: []int{3, 4}},
	{args: strings.Fields("EVALSHA 0123456789012345678901234567890123456789 1 a x"), want: []int{3}},
	{args: strings.Fields("EVAL_RO s 1 a"), want: []int{3}},
	{args: strings.Fields("FCALL f 0"), want: nil},
	{args: strings.Fields("FCALL f 2 a b x"), want: []int{3, 4}},
	{args: strings.Fields("ZUNIONSTORE d 2 a b WEIGHTS 1 2"), want: []int{1, 3, 4}},
	{args: strings.Fields("ZINTER 2 a b WITHSCORES"), want: []int{2, 3}},
	{args: strings.Fields("SINTERCARD 2 a b LIMIT 1"), want: []int{2, 3}},
	{args: strings.Fields("LMPOP 2 a b LEFT COUNT 2"), want: []int{2, 3}},
	{args: strings.Fields("BLMPOP 0 2 a b LEFT"), want: []int{3, 4}},
	{args: strings.Fields("BZMPOP 1.5 1 z MIN"), want: []int{3}},
	{args: strings.Fields("XREAD COUNT 2 BLOCK 10 STREAMS a b 0 0"), want: []int{6, 7}},
	{args: strings.Fields("XREAD STREAMS streams 0"), want: []int{2}},
	// Half the arguments after STREAMS, rounded down, are keys.
	{args: strings.Fields("XREAD STREAMS a b 0"), want: []int{2}},
	// strcasecmp ends an argument at a NUL: this is STREAMS to Redis.
	{args: []string{"XREAD", "streams\x00junk", "k", "0"}, want: []int{2}},
	{args: strings.Fields("XREADGROUP GROUP g c COUNT 1 STREAMS a b > >"), want: []int{7, 8}},
	{args: strings.Fields("XREADGROUP GROUP streams streams STREAMS k >"), want: []int{5}},
	{args: strings.Fields("XADD s * f v"), want: []int{1}},
	{args: strings.Fields("GEORADIUS g 0 0 1 km STORE d"), want: []int{1, 7}},
	{args: strings.Fields("GEORADIUS g 0 0 1 km STORE d STOREDIST e"), want: []int{1, 7, 9}},
	// The forward search for a keyword skips the last argument.
	{args: strings.Fields("GEORADIUS g 0 0 1 km STORE"), want: []int{1}},
	{args: strings.Fields("GEORADIUSBYMEMBER g m 1 km STOREDIST d"), want: []int{1, 6}},
	{args: strings.Fields("OBJECT ENCODING k"), want: []int{2}},
	{args: strings.Fields("object encoding k"), want: []int{2}},
	{args: strings.Fields("MEMORY USAGE k SAMPLES 5"), want: []int{2}},
	{args: strings.Fields("XINFO STREAM s FULL"), want: []int{2}},
	{args: strings.Fields("BITOP AND d a b"), want: []int{2, 3, 4}},
	{args: strings.Fields("BITFIELD k GET u8 0"), want: []int{1}},
	{args: strings.Fields("RENAME a b"), want: []int{1, 2}},
	{args: strings.Fields("LMOVE a b LEFT RIGHT"), want: []int{1, 2}},
	{args: strings.Fields("SMOVE a b m"), want: []int{1, 2}},
	{args: strings.Fields("PFMERGE d a b"), want: []int{1, 2, 3}},
	{args: strings.Fields("BLPOP a b 0"), want: []int{1, 2}},
	{args: strings.Fields("LCS a b"), want: []int{1, 2}},
	{args: strings.Fields("CLIENT LIST"), want: nil},
	{args: strings.Fields("CONFIG GET maxmemory"), want: nil},
	{args: strings.Fields("PING hello"), want: nil},
	{args: strings.Fields("SPUBLISH ch msg"), want: nil}, // a shard channel: not_key

	{args: strings.Fields("SORT k STORE d"), err: ErrUnknownKeys},
	{args: strings.Fields("SORT_RO k"), err: ErrUnknownKeys},
	{args: []string{"MIGRATE", "h", "1", "", "0", "5", "KEYS", "a", "b"}, err: ErrUnknownKeys},

	{args: strings.Fields("EVAL s 2 a"), err: ErrBadKeys, run: "ERR Number of keys can't be greater than number of args"},
	{args: strings.Fields("EVAL s -1 a"), err: ErrBadKeys, run: "ERR Number of keys can't be negative"},
	{args: strings.Fields("EVAL s x a"), err: ErrBadKeys, run: "ERR value is not an integer or out of range"},
	{args: strings.Fields("EVAL s 01 a"), err: ErrBadKeys, run: "ERR value is not an integer or out of range"},
	// Redis's spec code casts numkeys to a C int: COMMAND GETKEYS
	// answers "a" here, though EVAL refuses the line.
	{args: strings.Fields("EVAL s 4294967297 a"), err: ErrBadKeys, run: "ERR Number of keys can't be greater than number of args"},
	{args: strings.Fields("FCALL f 1"), err: ErrBadKeys, run: "ERR Function not found"},
	{args: strings.Fields("ZUNIONSTORE d 0 a"), err: ErrBadKeys, run: "ERR at least 1 input key is needed for 'zunionstore' command"},
	{args: strings.Fields("ZUNIONSTORE d 3 a b"), err: ErrBadKeys, run: "ERR syntax error"},
	{args: strings.Fields("ZINTER 2 a"), err: ErrBadKeys, run: "ERR syntax error"},
	{args: strings.Fields("SINTERCARD 0 a"), err: ErrBadKeys, run: "ERR numkeys should be greater than 0"},
	{args: strings.Fields("LMPOP 0 a LEFT"), err: ErrBadKeys, run: "ERR numkeys should be greater than 0"},
	{args: strings.Fields("BLMPOP 0 5 a b LEFT"), err: ErrBadKeys, run: "ERR syntax error"},
	{args: strings.Fields("XREAD COUNT 1 a"), err: ErrBadKeys, run: "ERR syntax error"},
}

func checkKeys(t *testing.T, specs map[string]*Spec, c keyCase) {
	t.Helper()
	args := byteArgs(c.args)
	s, err := Lookup(specs, args)
	if err != nil {
		t.Errorf("Lookup(%q): %v", c.args, err)
		return
	}
	dst := []int{-1} // Keys appends
	got, err := s.Keys(dst, args)
	if err != c.err || !slices.Equal(got[1:], c.want) || got[0] != -1 {
		t.Errorf("Keys(%q) = %v, %v; want %v, %v", c.args, got[1:], err, c.want, c.err)
	}
}

func byteArgs(args []string) [][]byte {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	return b
}

// TestKeysFixture checks the cases the fixture has specs for, with no
// server.
func TestKeysFixture(t *testing.T) {
	specs := fixture(t, "resp3")
	n := 0
	for _, c := range keyCases {
		if specs[strings.ToLower(c.args[0])] != nil {
			checkKeys(t, specs, c)
			n++
		}
	}
	if n < 20 {
		t.Errorf("only %d cases have specs in the fixture", n)
	}
}

func TestKeysDuplicates(t *testing.T) {
	// Specs that overlap, as a module's may.
	s := &Spec{Name: "m", Arity: -2, KeySpecs: []KeySpec{
		{BeginSearch: "index", Index: 1, FindKeys: "range", LastKey: 1, KeyStep: 1},
		{BeginSearch: "keyword", Keyword: "TO", StartFrom: 1, FindKeys: "range", KeyStep: 1},
		{BeginSearch: "index", Index: 2, FindKeys: "range", LastKey: -1, KeyStep: 1},
	}}
	got, err := s.Keys(nil, byteArgs(strings.Fields("m a TO b c")))
	if want := []int{1, 2, 3, 4}; err != nil || !slices.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	// A module command with movable keys and no specs.
	s = &Spec{Name: "m", Arity: -1, Flags: []string{"movablekeys"}}
	if _, err := s.Keys(nil, byteArgs([]string{"m", "a"})); err != ErrUnknownKeys {
		t.Errorf("movable keys without specs: got %v, want ErrUnknownKeys", err)
	}
}

// server is a one-node Redis Cluster with a RESP3 and a RESP2 client.
type server struct{ resp3, resp2 rueidis.Client }

func newServer(t *testing.T) *server {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	s := &server{}
	for _, resp2 := range []bool{false, true} {
		cl, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:       []string{c.Nodes[0].Addr},
			ForceSingleClient: true,
			DisableCache:      true,
			DisableRetry:      true,
			AlwaysRESP2:       resp2,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		if resp2 {
			s.resp2 = cl
		} else {
			s.resp3 = cl
		}
	}
	return s
}

func (s *server) do(t *testing.T, args ...string) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := s.resp3.Do(ctx, s.resp3.B().Arbitrary(args...).Build())
	if err := r.NonRedisError(); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return r
}

func (s *server) specs(t *testing.T, cl rueidis.Client, args ...string) map[string]*Spec {
	t.Helper()
	m, err := cl.Do(context.Background(), cl.B().Arbitrary(args...).Build()).ToMessage()
	if err != nil {
		t.Fatal(err)
	}
	specs, err := Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	return specs
}

// TestRedis compares the package with a live redis-server: COMMAND as
// parsed, Keys with COMMAND GETKEYS, Lookup's errors with the server's.
func TestRedis(t *testing.T) {
	s := newServer(t)
	specs := s.specs(t, s.resp3, "COMMAND")
	t.Run("parse", func(t *testing.T) {
		if len(specs) < 200 || specs["get"] == nil || specs["config"].Subcommands["get"] == nil {
			t.Fatalf("COMMAND parsed to only %d specs", len(specs))
		}
		if resp2 := s.specs(t, s.resp2, "COMMAND"); !reflect.DeepEqual(specs, resp2) {
			t.Error("COMMAND over RESP2 parses differently from RESP3")
		}
		info, _ := s.do(t, "INFO", "server").ToString()
		if !strings.Contains(info, "redis_version:"+fixtureVersion) {
			t.Skipf("redis-server is not %sx: not comparing the fixture", fixtureVersion)
		}
		live := s.specs(t, s.resp3, append([]string{"COMMAND", "INFO"}, fixtureNames...)...)
		if !reflect.DeepEqual(live, fixture(t, "resp3")) {
			t.Error("the fixture differs from the server's COMMAND INFO: capture it again")
		}
	})
	t.Run("keys", func(t *testing.T) {
		for _, c := range keyCases {
			checkKeys(t, specs, c)
			if c.err != ErrBadKeys {
				s.compareGetKeys(t, specs, c.args)
			} else {
				// ErrBadKeys stands for the command's own refusal: the line
				// must fail, with the message noted. (COMMAND GETKEYS, after
				// its spec code fails, retries with code that parses numbers
				// with atoi and may find keys.)
				if got := errReply(s.do(t, c.args...)); got != c.run {
					t.Errorf("running %q: got %q, want %q", c.args, got, c.run)
				}
			}
		}
	})
	t.Run("every command", func(t *testing.T) {
		// Each command and subcommand, with as many arguments as its
		// arity asks and a few more, all distinct words or all "1" (a
		// number of keys).
		found := map[string]int{}
		for _, top := range specs {
			for _, sp := range append([]*Spec{top}, mapValues(top.Subcommands)...) {
				if sp.Subcommands != nil {
					continue
				}
				name := strings.Split(sp.Name, "|")
				lo, hi := sp.Arity, sp.Arity
				if sp.Arity < 0 {
					lo, hi = -sp.Arity, -sp.Arity+3
				}
				// COMMAND GETKEYS needs a command of two words at least.
				for argc := max(lo, 2); argc <= hi; argc++ {
					for _, fill := range []string{"w", "1"} {
						args := slices.Clone(name)
						for len(args) < argc {
							a := fill
							if fill == "w" {
								a += strconv.Itoa(len(args))
							}
							args = append(args, a)
						}
						found[s.compareGetKeys(t, specs, args)]++
					}
				}
			}
		}
		t.Logf("lines compared, by what Keys found: %v", found)
		if found["keys"] < 500 || found["bad"] < 50 {
			t.Errorf("too few lines with keys or malformed: %v", found)
		}
	})
	t.Run("lookup errors", func(t *testing.T) {
		long := strings.Repeat("x", 200)
		for _, args := range [][]string{
			{"FOO"},
			{"foo", "a", "b"},
			{"\x00x", "a"}, // rueidis sends no empty name; C prints this one as ''
			{"foo", long},
			{long, "a"},
			{"foo", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccccccccccccc",
				"dddddddddddddddddddddddddddddd", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "f"},
			{"foo", "a\r\nb", "c\nd"},
			{"foo\r", "a\x00b", "c"},
			{"config|get", "maxmemory"},
			{"GET"},
			{"get", "a", "b"},
			{"GeT", "a", "b"},
			{"MSET", "a"},
			{"config"},
			{"CONFIG", "GET"},
			{"config", "Get"},
			{"CONFIG", "foo"},
			{"config", "Foo", "bar"},
			{"Client", "nosuch", "x"},
			{"object", "x\r\ny"},
			{"object", "a\x00b"},
			{"xinfo", long},
		} {
			want := errReply(s.do(t, args...))
			_, got := Lookup(specs, byteArgs(args))
			if want == "" || got == nil || got.Error() != want {
				t.Errorf("%q: Lookup says %v, Redis %q", args, got, want)
			}
		}
		for _, args := range [][]string{{"GET", "a"}, {"config", "GET", "maxmemory"}, {"PING"}} {
			if err := errReply(s.do(t, args...)); err != "" {
				t.Fatalf("%q: %s", args, err)
			}
			if sp, err := Lookup(specs, byteArgs(args)); err != nil {
				t.Errorf("Lookup(%q) = %v, %v; Redis runs it", args, sp, err)
			}
		}
	})
}

// errReply is r's error reply as Redis sent it, or "": rueidis's errors
// drop the ERR code, its ToString keeps it.
func errReply(r rueidis.RedisResult) string {
	if err := r.Error(); err == nil || rueidis.IsRedisNil(err) {
		return ""
	}
	s, _ := r.ToString()
	return s
}

func mapValues(m map[string]*Spec) []*Spec {
	var v []*Spec
	for _, s := range m {
		v = append(v, s)
	}
	return v
}

// compareGetKeys checks Keys against COMMAND GETKEYS for one line, and
// says what Keys found: "keys", "none", or its error. Where Keys finds the
// line malformed, Redis's spec code does too, but COMMAND GETKEYS then
// retries with code of its own that may find keys, as the line's fate
// does not depend on them: the table's malformed lines are run instead.
func (s *server) compareGetKeys(t *testing.T, specs map[string]*Spec, args []string) string {
	t.Helper()
	sp, err := Lookup(specs, byteArgs(args))
	if err != nil {
		t.Errorf("Lookup(%q): %v", args, err)
		return "lookup"
	}
	keys, err := sp.Keys(nil, byteArgs(args))
	r := s.do(t, append([]string{"COMMAND", "GETKEYS"}, args...)...)
	server, serr := r.AsStrSlice()
	reply := errReply(r)
	var got []string
	for _, p := range keys {
		got = append(got, args[p])
	}
	switch {
	case err == ErrUnknownKeys:
		return "unknown"
	case err == ErrBadKeys:
		if reply != ErrBadKeys.Error() && !(serr == nil && len(server) == 0 && sp.Has("no_mandatory_keys")) {
			t.Errorf("%q: Keys says %v, COMMAND GETKEYS %q %q", args, err, server, reply)
		}
		return "bad"
	case err != nil:
		t.Errorf("%q: Keys: %v", args, err)
		return err.Error()
	case len(got) == 0:
		if serr == nil && len(server) > 0 ||
			serr != nil && reply != "ERR The command has no key arguments" {
			t.Errorf("%q: Keys finds none, COMMAND GETKEYS says %q %q", args, server, reply)
		}
		return "none"
	case serr != nil || !slices.Equal(got, server):
		t.Errorf("%q: Keys finds %q, COMMAND GETKEYS says %q %q", args, got, server, reply)
	}
	return "keys"
}

func FuzzKeys(f *testing.F) {
	specs := fixture(f, "resp3")
	var all []*Spec
	for _, s := range specs {
		all = append(all, s)
		all = append(all, mapValues(s.Subcommands)...)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		dst := make([]int, 0, 16)
		args := bytes.Split(line, []byte(" "))
		_, err := Lookup(specs, args)
		if err != nil && (!strings.HasPrefix(err.Error(), "ERR ") || strings.ContainsAny(err.Error(), "\r\n")) {
			t.Fatalf("Lookup(%q): %q is no error reply", args, err)
		}
		// Every spec, the one Lookup finds or not, whatever the arity.
		for _, s := range all {
			keys, err := s.Keys(dst[:0], args)
			if err != nil && err != ErrBadKeys && err != ErrUnknownKeys {
				t.Fatalf("%s: Keys(%q): %v", s.Name, args, err)
			}
			for i, p := range keys {
				if p < 1 || p >= len(args) || slices.Contains(keys[:i], p) {
					t.Fatalf("%s: Keys(%q) = %v", s.Name, args, keys)
				}
			}
		}
	})
}

func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/command-info.resp3")
	if err != nil {
		f.Fatal(err)
	}
	// Each entry of the fixture on its own: the fuzzer minimizes a large
	// input for up to a minute.
	_, rest, _ := bytes.Cut(b, []byte("\r\n"))
	for len(rest) > 0 {
		_, after, err := convert(nil, rest, 0)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte("*1\r\n"), rest[:len(rest)-len(after)]...))
		rest = after
	}
	f.Fuzz(func(t *testing.T, resp []byte) {
		m, _, err := message(resp)
		if err != nil {
			return
		}
		specs, err := Parse(m)
		for name, s := range specs {
			if err != nil || name != s.Name {
				t.Fatalf("Parse: %q for %q, and %v", name, s.Name, err)
			}
			s.Keys(nil, [][]byte{[]byte(name), []byte("1"), []byte("1")})
		}
	})
}

func BenchmarkKeys(b *testing.B) {
	specs := fixture(b, "resp3")
	for _, line := range []string{"GET user:1", "EVAL script 2 a b x y"} {
		args := byteArgs(strings.Fields(line))
		b.Run(strings.ToLower(line[:strings.IndexByte(line, ' ')]), func(b *testing.B) {
			b.ReportAllocs()
			s, err := Lookup(specs, args)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]int, 0, 4)
			for b.Loop() {
				dst, _ = s.Keys(dst[:0], args)
			}
		})
	}
}

func BenchmarkLookup(b *testing.B) {
	specs := fixture(b, "resp3")
	args := byteArgs(strings.Fields("object encoding k"))
	b.ReportAllocs()
	for b.Loop() {
		Lookup(specs, args)
	}
}
