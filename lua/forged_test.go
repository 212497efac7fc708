package lua_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
)

// forgedValues are values a caller can write to a bucket's key through
// passthrough, by what sluice must take them for: "tat" a bucket, "live"
// and "lapsed" a split marker, "" none of sluice's (WRONGTYPE).
var forgedValues = []struct{ v, kind string }{
	{"0", "tat"},
	{"1700000000000000000", "tat"},
	{"0000000000000000001", "tat"},
	{"9223372036854775807", "tat"},
	{"9223372036854775808", ""},
	{"9999999999999999999", ""},
	{"10000000000000000000", ""},
	{"00", ""},
	{"1", ""},
	{"", ""},
	{"+234567890123456789", ""},
	{"-234567890123456789", ""},
	{" 234567890123456789", ""},
	{"123456789012345678 ", ""},
	{"1.34567890123456789", ""},
	{"1e345678901234567", ""},
	{"0x34567890123456789", ""},
	{"1700000000000000000\n", ""},
	{strings.Repeat("9", 1<<20), ""},
	{"~", ""},
	{"~1:2:3:", ""},
	{"~1:2:0:", ""},
	{"~0:2:0:", ""},
	{"~0:2:0:g:", ""},
	{"~0:2:0::a", ""},
	{"~0:2:0:G:a", ""},
	{"~0:2:0:g:A", ""},
	{"~0:2:0:g:{a}", ""},
	{"~0:2:0:g:a,,b", ""},
	{"~0:2:0:g:,a", ""},
	{"~0:2:0:g:a,", ""},
	{"~0:2:0:g:a!!", ""},
	{"~0:2:0:g:!", ""},
	{"~0:2:0:g:a b", ""},
	{"~0:2:0:g:a\n", ""},
	{"~0:2:3:g:a", ""},
	{"~1:2:0:g:a", ""},
	{"~0:2:9999999999999999999:g:a", ""},
	{"~0:2:" + strings.Repeat("9", 400) + ":g:a", ""},
	{"~9999999999999999999:9999999999999:0:g:a", ""},
	{"~" + strings.Repeat("1", 100000) + ":2:0:g:a", ""},
	{"~0:99999999999999:0:g:a", ""},
	{"~0:" + strings.Repeat("9", 400) + ":0:g:a", ""},
	{"~0::0:g:a", ""},
	{"~0:9999999999999:0:g:a", "live"},
	{"~1700000000000000123:9999999999999:1700000000500000000:1f:x,y!", "live"},
	{"~0:9999999999999:0000000000000000001:g:a", "live"},
	{"~0:2:0:g:a", "lapsed"},
	{"~1700000000000000123:1:1700000000500000000:1f:x!", "lapsed"},
	{"~9223372036854775807:0000000000002:9223372036854775807:0:a,b", "lapsed"},
	{"~0:9999999999999:0:g:" + tagList(lua.MaxTags, ""), "live"},
	{"~0:9999999999999:0:g:" + tagList(lua.MaxTags, "!"), "live"},
	{"~0:2:0:g:" + tagList(lua.MaxTags, ""), "lapsed"},
	{"~0:9999999999999:0:g:" + tagList(lua.MaxTags+1, ""), ""},
	{"~0:9999999999999:0:g:" + tagList(lua.MaxTags+1, "!"), ""},
	{"~0:2:0:g:" + tagList(lua.MaxTags+1, ""), ""},
	{"~0:9999999999999:0:g:" + tagList(1<<16, ""), ""},
}

// tagList is n comma-separated tags, then end.
func tagList(n int, end string) string {
	tags := make([]string, n)
	for i := range tags {
		tags[i] = strconv.Itoa(i)
	}
	return strings.Join(tags, ",") + end
}

// Every script takes a stored value for sluice's or not alike: THROTTLE
// (declared, many and raw calls), split.lua and lua.Marker read exactly
// what THROTTLE.RESET deletes; anything else answers WRONGTYPE on each,
// is left as it is by the reset, and never makes a script fail. Keys of
// Redis's other types answer Redis's WRONGTYPE on each.
func TestForgedValuesAgree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s := newShards(t, ctx, clustertest.Config{Primaries: 1, Replicas: -1})
	th, rs, sp := lua.NewThrottle(), lua.NewResetter(), lua.NewSplitter()
	conn, err := net.Dial("tcp", s.c.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	br := bufio.NewReader(conn)
	const key = "forged"
	wrongType := func(err error) bool {
		var le *lua.Error
		if errors.As(err, &le) {
			return le.IsWrongType()
		}
		return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
	}
	check := func(name, kind string, set func()) {
		t.Helper()
		calls := []lua.Call{
			{Key: key, Capacity: 5, U: 86_400_000_000, V: 1, Cost: 1},
			{Key: "other", Capacity: 5, U: 86_400_000_000, V: 1, Cost: 0},
		}
		got := map[string]error{}
		set()
		res, errs := make([]lua.Result, 1), make([]error, 1)
		th.Do(ctx, s.cl, calls[:1], res, errs)
		got["Do"] = errs[0]
		set()
		out := make([]lua.Outcome, 2)
		th.DoMany(ctx, s.nodes[0], calls, out)
		got["DoMany"] = out[0].Err
		if out[1].Err != nil {
			t.Errorf("%s: the bucket after it in a many call: %v", name, out[1].Err)
		}
		set()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(th.AppendMany(nil, calls)); err != nil {
			t.Fatal(err)
		}
		r, err := reply.Read(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := lua.ReadMany(r, out); err != nil {
			t.Fatalf("%s: raw: %v", name, err)
		}
		got["raw"] = out[0].Err
		if out[1].Err != nil {
			t.Errorf("%s: the bucket after it in a raw call: %v", name, out[1].Err)
		}
		for path, err := range got {
			switch {
			case kind == "" && !wrongType(err):
				t.Errorf("%s: THROTTLE (%s) answered %v, want WRONGTYPE", name, path, err)
			case kind == "live" && lua.SplitOf(err) == nil:
				t.Errorf("%s: THROTTLE (%s) answered %v, want its split", name, path, err)
			case (kind == "tat" || kind == "lapsed") && err != nil:
				t.Errorf("%s: THROTTLE (%s) answered %v, want a decision", name, path, err)
			}
		}
		set()
		_, err = sp.Renew(ctx, s.cl, key, lua.Renewal{Tags: []string{"a"}, TTL: time.Second, TTF: -1})
		if (kind == "") != wrongType(err) || (kind != "" && err != nil) {
			t.Errorf("%s: split.lua answered %v", name, err)
		}
		set()
		err = rs.Reset(ctx, s.cl, []string{key})[0].Error()
		n, _ := s.cl.Do(ctx, s.cl.B().Exists().Key(key).Build()).AsInt64()
		switch {
		case kind == "" && (!wrongType(err) || n != 1):
			t.Errorf("%s: THROTTLE.RESET answered %v and left %d keys, want WRONGTYPE and the key", name, err, n)
		case kind != "" && (err != nil && !rueidis.IsRedisNil(err) || n != 0):
			t.Errorf("%s: THROTTLE.RESET answered %v and left %d keys, want the bucket deleted", name, err, n)
		}
	}
	for _, tc := range forgedValues {
		name := tc.v
		if len(name) > 48 {
			name = name[:48] + "..."
		}
		if _, ok := lua.Marker(tc.v); ok != (tc.kind == "live" || tc.kind == "lapsed") {
			t.Errorf("%q: lua.Marker reads it: %v", name, ok)
		}
		check(name, tc.kind, func() {
			if err := s.cl.Do(ctx, s.cl.B().Set().Key(key).Value(tc.v).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, typ := range []struct {
		name  string
		write func() error
	}{
		{"hash", func() error {
			return s.cl.Do(ctx, s.cl.B().Hset().Key(key).FieldValue().FieldValue("f", "1").Build()).Error()
		}},
		{"list", func() error { return s.cl.Do(ctx, s.cl.B().Rpush().Key(key).Element("1").Build()).Error() }},
		{"set", func() error { return s.cl.Do(ctx, s.cl.B().Sadd().Key(key).Member("1").Build()).Error() }},
		{"zset", func() error {
			return s.cl.Do(ctx, s.cl.B().Zadd().Key(key).ScoreMember().ScoreMember(1, "1").Build()).Error()
		}},
		{"stream", func() error {
			return s.cl.Do(ctx, s.cl.B().Xadd().Key(key).Id("*").FieldValue().FieldValue("f", "1").Build()).Error()
		}},
	} {
		check(typ.name, "", func() {
			if err := s.cl.Do(ctx, s.cl.B().Del().Key(key).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if err := typ.write(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
