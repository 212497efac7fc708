package proxy_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// resp3Types are commands whose replies take each of RESP3's types (maps,
// sets, doubles, booleans, big numbers, verbatim strings, nulls, empty
// aggregates, nested arrays, errors with a code) and, for a RESP2 client,
// the RESP2 forms Redis 7 gives the same; Lua scripts give the types no
// core command of 7.0 does. '%' is a prefix, as in passthroughCommands.
var resp3Types = [][]string{
	// Maps, empty ones, and nulls.
	{"HSET", "{%t}h", "f", "1", "g", "2"},
	{"HGETALL", "{%t}h"},
	{"HGETALL", "%none"},
	{"HGET", "{%t}h", "nosuch"},
	{"HGET", "%none", "f"},
	{"HMGET", "{%t}h", "f", "nosuch"},
	{"HRANDFIELD", "%none", "2", "WITHVALUES"},
	{"HRANDFIELD", "%none"},
	{"GET", "%none"},
	{"LPOP", "%none"},
	{"LPOP", "%none", "2"},
	{"RPOP", "%none", "0"},
	{"LRANGE", "%none", "0", "-1"},
	{"ZSCORE", "%none", "m"},
	{"ZRANDMEMBER", "%none"},
	{"ZRANDMEMBER", "%none", "2", "WITHSCORES"},
	{"SRANDMEMBER", "%none"},
	{"SPOP", "%none"},
	{"SPOP", "%none", "2"},
	{"XRANGE", "%none", "-", "+"},
	{"GETDEL", "%none"},
	{"OBJECT", "FREQ", "%none"},
	// Sets (integers: one order on every node).
	{"SADD", "{%t}s1", "1", "2", "3"},
	{"SADD", "{%t}s2", "2", "3", "4"},
	{"SMEMBERS", "{%t}s1"},
	{"SMEMBERS", "%none"},
	{"SINTER", "{%t}s1", "{%t}s2"},
	{"SINTER", "{%t}s1", "{%t}none"},
	{"SDIFF", "{%t}s1", "{%t}s2"},
	{"SDIFF", "{%t}none", "{%t}s2"},
	{"SUNION", "{%t}s1", "{%t}s2"},
	// Doubles, and a double that is a bulk string in RESP3 too.
	{"ZADD", "{%t}z", "1.5", "a", "2", "b", "-inf", "c", "+inf", "d"},
	{"ZADD", "{%t}z", "INCR", "0.1", "a"},
	{"ZADD", "{%t}z", "XX", "INCR", "1", "nosuch"},
	{"ZSCORE", "{%t}z", "a"},
	{"ZSCORE", "{%t}z", "c"},
	{"ZSCORE", "{%t}z", "d"},
	{"ZSCORE", "{%t}z", "nosuch"},
	{"ZMSCORE", "{%t}z", "a", "nosuch", "d"},
	{"ZINCRBY", "{%t}z", "0.25", "b"},
	{"ZINCRBY", "{%t}z", "1e300", "b"},
	{"ZRANGE", "{%t}z", "0", "-1", "WITHSCORES"},
	{"ZRANGE", "{%t}z", "0", "-1", "REV", "WITHSCORES"},
	{"ZRANGEBYSCORE", "{%t}z", "-inf", "+inf", "WITHSCORES", "LIMIT", "0", "2"},
	{"ZADD", "{%t}zone", "0.1", "m"},
	{"ZRANDMEMBER", "{%t}zone", "-3", "WITHSCORES"},
	{"ZRANDMEMBER", "{%t}zone", "2", "WITHSCORES"},
	{"ZPOPMIN", "{%t}z"},
	{"ZPOPMAX", "{%t}z", "2"},
	{"ZPOPMIN", "%none", "2"},
	{"ZPOPMIN", "%none"},
	{"ZUNION", "2", "{%t}z", "{%t}none", "WITHSCORES"},
	{"ZINTER", "2", "{%t}z", "{%t}none", "WITHSCORES"},
	{"ZRANK", "{%t}z", "nosuch"},
	{"SET", "{%t}f", "10.5"},
	{"INCRBYFLOAT", "{%t}f", "0.1"},
	{"INCRBYFLOAT", "{%t}f", "5.0e3"},
	{"HINCRBYFLOAT", "{%t}h", "x", "1.5"},
	{"GEOADD", "{%t}g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"},
	{"GEODIST", "{%t}g", "Palermo", "Catania", "km"},
	{"GEODIST", "{%t}g", "Palermo", "nosuch"},
	{"GEOPOS", "{%t}g", "nosuch"},
	{"GEOHASH", "{%t}g", "Palermo", "nosuch"},
	{"GEOSEARCH", "{%t}g", "FROMMEMBER", "Palermo", "BYBOX", "400", "400", "km", "ASC", "WITHDIST", "WITHHASH", "WITHCOORD"},
	// Nested arrays and maps.
	{"XADD", "{%t}x", "1-1", "f", "v"},
	{"XADD", "{%t}x", "2-1", "g", "w", "h", "z"},
	{"XRANGE", "{%t}x", "-", "+"},
	{"XREVRANGE", "{%t}x", "+", "-", "COUNT", "1"},
	{"XREAD", "STREAMS", "{%t}x", "0"},
	{"XREAD", "STREAMS", "{%t}x", "$"},
	{"XREAD", "STREAMS", "{%t}x", "{%t}none", "0", "0"},
	{"XGROUP", "CREATE", "{%t}x", "g", "0"},
	{"XREADGROUP", "GROUP", "g", "c", "STREAMS", "{%t}x", ">"},
	{"XREADGROUP", "GROUP", "g", "c", "STREAMS", "{%t}x", ">"},
	{"XREADGROUP", "GROUP", "g", "c", "STREAMS", "{%t}x", "0"},
	{"XDEL", "{%t}x", "1-1"},
	{"XREADGROUP", "GROUP", "g", "c", "STREAMS", "{%t}x", "0"},
	{"XAUTOCLAIM", "{%t}x", "g", "c2", "0", "0-0"},
	{"XINFO", "STREAM", "{%t}x"},
	{"XINFO", "GROUPS", "{%t}x"},
	{"XINFO", "GROUPS", "%none"},
	{"XPENDING", "{%t}x", "g"},
	{"XPENDING", "{%t}x", "nosuch"},
	{"LCS", "{%t}nosuch", "{%t}none", "IDX"},
	{"OBJECT", "HELP"},
	// Errors with a code.
	{"LPUSH", "{%t}h", "x"},
	{"GET", "{%t}h"},
	{"ZSCORE", "{%t}h", "x"},
	{"INCRBYFLOAT", "{%t}h", "1"},
	{"INCR", "{%t}f"},
	{"XADD", "{%t}x", "0-0", "f", "v"},
	{"XGROUP", "CREATE", "{%t}x", "g", "0"},
	// Lua: each type as RESP3 gives it, and as RESP2 does.
	{"EVAL", "redis.setresp(3); return {double=1.5}", "0"},
	{"EVAL", "redis.setresp(3); return {double=1/0}", "0"},
	{"EVAL", "redis.setresp(3); return {double=-1/0}", "0"},
	{"EVAL", "redis.setresp(3); return {double=0/0}", "0"},
	{"EVAL", "redis.setresp(3); return {double=1e300}", "0"},
	{"EVAL", "redis.setresp(3); return {double=0.1}", "0"},
	{"EVAL", "return {double=2.5}", "0"},
	{"EVAL", "redis.setresp(3); return {big_number='1234567890123456789012345678901234567890'}", "0"},
	{"EVAL", "redis.setresp(3); return {big_number='-12'}", "0"},
	{"EVAL", "redis.setresp(3); return {big_number='x1\\r\\ny'}", "0"},
	{"EVAL", "redis.setresp(3); return {big_number=''}", "0"},
	{"EVAL", "redis.setresp(3); return {verbatim_string={format='txt', string='hello'}}", "0"},
	{"EVAL", "redis.setresp(3); return {verbatim_string={format='mkd', string=''}}", "0"},
	{"EVAL", "redis.setresp(3); return {verbatim_string={format='m', string='a\\r\\nb'}}", "0"},
	{"EVAL", "redis.setresp(3); return {verbatim_string={format='', string='x'}}", "0"},
	{"EVAL", "redis.setresp(3); return {verbatim_string={format='toolong', string='x'}}", "0"},
	{"EVAL", "redis.setresp(3); return true", "0"},
	{"EVAL", "redis.setresp(3); return false", "0"},
	{"EVAL", "return true", "0"},
	{"EVAL", "return false", "0"},
	{"EVAL", "redis.setresp(3); return nil", "0"},
	{"EVAL", "return nil", "0"},
	{"EVAL", "redis.setresp(3); return {map={a=1}}", "0"},
	{"EVAL", "redis.setresp(3); return {map={}}", "0"},
	{"EVAL", "redis.setresp(3); return {set={a=true}}", "0"},
	{"EVAL", "redis.setresp(3); return {set={}}", "0"},
	{"EVAL", "redis.setresp(3); return {1, {double=2.5}, {map={k={set={x=true}}}}, true, {big_number='9'}}", "0"},
	{"EVAL", "return {}", "0"},
	{"EVAL", "return {1, {2, {3}}, 'x'}", "0"},
	{"EVAL", "redis.setresp(3); return redis.call('HGETALL', KEYS[1])", "1", "{%t}h"},
	{"EVAL", "redis.setresp(3); return redis.call('ZSCORE', KEYS[1], 'b')", "1", "{%t}z"},
	{"EVAL", "redis.setresp(3); return redis.call('SMEMBERS', KEYS[1])", "1", "{%t}s1"},
	{"EVAL", "redis.setresp(3); return redis.call('GET', KEYS[1])", "1", "{%t}none"},
	{"EVAL", "redis.setresp(3); return redis.call('SISMEMBER', KEYS[1], '1')", "1", "{%t}s1"},
	{"EVAL", "return redis.call('HGETALL', KEYS[1])", "1", "{%t}h"},
	{"EVAL", "return redis.error_reply('MYCODE my message')", "0"},
	{"EVAL", "return redis.error_reply('')", "0"},
	{"EVAL", "return {err='no code'}", "0"},
	{"EVAL", "return redis.status_reply('FINE')", "0"},
	{"EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "{%t}h"},
	{"EVAL", "return redis.call('INCR', KEYS[1])", "1", "{%t}h"},
	{"EVAL", "return {double=1.5}", "0"},
	{"EVAL", "redis.setresp(2); return redis.call('HGETALL', KEYS[1])", "1", "{%t}h"},
	{"EVAL_RO", "redis.setresp(3); return {double=3.25}", "0"},
	{"FCALL", "nosuch", "0"},
	// Malformed forms: the node's errors, in either protocol.
	{"hgetall", "{%t}h"},
	{"ZsCoRe", "{%t}z", "a"},
	{"OBJECT"},
	{"XINFO"},
	{"XGROUP"},
	{"XGROUP", "CREATE", "{%t}x"},
	{"XGROUP", "NOSUCH", "{%t}x"},
	{"MEMORY"},
	{"MEMORY", "NOSUCH"},
	{"OBJECT", "ENCODING", "{%t}h", "x"},
	{"EVAL"},
	{"EVAL", "return 1"},
	{"EVAL", "return 1", "-1"},
	{"EVAL", "return 1", "x"},
	{"EVAL", "return 1", "99999999999999999999"},
	{"EVALSHA", "x", "0"},
	{"EVALSHA", "x"},
	{"FCALL"},
	{"FCALL", "f", "1"},
	{"FCALL_RO", "f", "-1"},
	{"XREAD"},
	{"XREAD", "STREAMS"},
	{"XREADGROUP", "GROUP"},
	{"XREADGROUP", "GROUP", "g", "c", "STREAMS", "{%t}x"},
	{"ZUNIONSTORE", "{%t}d", "x", "{%t}z"},
	{"ZUNIONSTORE", "{%t}d", "0"},
	{"ZUNION", "0", "{%t}z"},
	{"ZINTERCARD", "0", "{%t}z"},
	{"SINTERCARD", "-1", "{%t}z"},
	{"LMPOP"},
	{"BLMPOP", "x", "1", "{%t}l", "LEFT"},
	{"SORT"},
	{"GEORADIUS", "{%t}g"},
	{"GEOSEARCH", "{%t}g", "FROMMEMBER", "nosuch", "BYRADIUS", "1", "km"},
	{"SET", "{%t}a"},
	{"SET", "{%t}a", "1", "NX", "XX"},
	{"SET", "{%t}a", "1", "PX", "99999999999999999999"},
	{"INCRBY", "{%t}a", "9223372036854775807"},
	{"INCRBY", "{%t}a", "9223372036854775807"},
	{"INCRBYFLOAT", "{%t}a", "inf"},
	{"ZADD", "{%t}z", "nan", "x"},
	{"ZINCRBY", "{%t}z", "+inf", "c"},
	{"HINCRBYFLOAT", "{%t}h", "f", "abc"},
	{"BITFIELD", "{%t}b", "GET", "u64", "0"},
	{"XADD", "{%t}x", "MAXLEN", "-1", "*", "f", "v"},
	{"XTRIM", "{%t}x", "MINID", "~", "0", "LIMIT", "x"},
	{"PFADD", "{%t}h", "x"},
	{"APPEND", "{%t}z", "x"},
	{"SUBSTR", "{%t}a", "0", "-1"},
	{"GETRANGE", "{%t}a", "x", "1"},
	{"", "{%t}a"},
	{"RESTORE", "{%t}a", "0", "x", "REPLACE", "IDLETIME", "-1"},
	{"WAITAOF", "0", "0", "0"},
	{"LPOS", "{%t}l", "a", "RANK", "-9223372036854775808"},
}

// helloPipeline switches the protocol back and forth within one write,
// with typed replies on each side of each switch, in and out of
// transactions, watches and blocking commands. Its keys share a slot.
func helloPipeline(k string) [][]string {
	h, z, s, n, w, l, x := "{"+k+"}h", "{"+k+"}z", "{"+k+"}s", "{"+k+"}none", "{"+k+"}w", "{"+k+"}l", "{"+k+"}x"
	return [][]string{
		{"HSET", h, "f", "1"}, {"ZADD", z, "1.5", "m"}, {"SADD", s, "1", "2"}, {"SET", w, "0"},
		{"HELLO", "3"},
		{"HGETALL", h}, {"ZSCORE", z, "m"}, {"GET", n}, {"SMEMBERS", s}, {"HGETALL", n},
		{"HELLO", "2"},
		{"HGETALL", h}, {"ZSCORE", z, "m"}, {"GET", n}, {"SMEMBERS", s},
		{"HELLO", "3"},
		{"MULTI"}, {"HGETALL", h}, {"ZSCORE", z, "m"}, {"GET", n}, {"SMEMBERS", s}, {"ZRANGE", z, "0", "-1", "WITHSCORES"}, {"EXEC"},
		{"HELLO", "2"},
		{"MULTI"}, {"HGETALL", h}, {"ZSCORE", z, "m"}, {"GET", n}, {"EXEC"},
		{"EVAL", "redis.setresp(3); return {1, {double=2.5}, {map={a=true}}, {big_number='7'}}", "1", h},
		{"BLPOP", l, "0.01"}, {"XREAD", "BLOCK", "10", "STREAMS", x, "$"},
		{"HELLO", "3"},
		{"EVAL", "redis.setresp(3); return {1, {double=2.5}, {map={a=true}}, {big_number='7'}}", "1", h},
		{"BLPOP", l, "0.01"}, {"BZPOPMIN", z + "2", "0.01"}, {"XREAD", "BLOCK", "10", "STREAMS", x, "$"},
		{"MULTI"}, {"BLPOP", l, "1"}, {"ZPOPMIN", z + "2"}, {"EXEC"},
		// A watch the client itself breaks: EXEC's null in the protocol
		// of the moment.
		{"WATCH", w}, {"SET", w, "1"}, {"HELLO", "2"}, {"MULTI"}, {"GET", w}, {"EXEC"},
		{"WATCH", w}, {"SET", w, "2"}, {"HELLO", "3"}, {"MULTI"}, {"GET", w}, {"EXEC"},
		{"WATCH", w}, {"HELLO", "2"}, {"MULTI"}, {"HGETALL", h}, {"ZSCORE", z, "m"}, {"EXEC"},
		{"WATCH", w}, {"HELLO", "3"}, {"MULTI"}, {"HGETALL", h}, {"ZSCORE", z, "m"}, {"EXEC"},
		{"HELLO", "2"},
		{"HGETALL", h},
	}
}

// A pipeline that switches protocols mid-way gets, for each command, the
// node's bytes in the protocol of the moment.
func TestHelloSwitchMidPipelineTypedReplies(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		through := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		for i := range 3 {
			key := "hp:" + strconv.Itoa(loops) + ":" + strconv.Itoa(i)
			straight := dialRaw(t, primaryOf(t, c, "{"+key+"d}").Addr)
			through.send(helloPipeline(key + "s")...)
			straight.send(helloPipeline(key + "d")...)
			var got, want []string
			for _, cmd := range helloPipeline(key) {
				g, w := through.read(), straight.read()
				if cmd[0] != "HELLO" { // HELLO's reply is sluice's own
					got, want = append(got, strings.ReplaceAll(g, key+"s", key+"d")), append(want, w)
				}
			}
			likeTheNode(t, "loops "+strconv.Itoa(loops)+", pipeline "+strconv.Itoa(i)+": ", got, want)
		}
	}
}

// A RESP2 client and a RESP3 client take turns on the same keys: each
// gets the node's bytes in its own protocol, as two clients of one node
// would.
func TestRESP2AndRESP3ClientsInterleaved(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		p := "il:" + strconv.Itoa(loops) + ":"
		s2, s3 := dialRaw(t, addr), dialRaw(t, addr)
		s3.do("HELLO", "3")
		d2, d3 := dialRaw(t, primaryOf(t, c, "{"+p+"d}").Addr), dialRaw(t, primaryOf(t, c, "{"+p+"d}").Addr)
		d3.do("HELLO", "3")
		cmds := [][]string{
			{"HSET", "{%}h", "f", "1"}, {"HGETALL", "{%}h"}, {"HINCRBYFLOAT", "{%}h", "f", "0.5"},
			{"ZADD", "{%}z", "1.5", "m"}, {"ZINCRBY", "{%}z", "1", "m"}, {"ZRANGE", "{%}z", "0", "-1", "WITHSCORES"},
			{"SADD", "{%}s", "1"}, {"SMEMBERS", "{%}s"}, {"GET", "{%}none"}, {"LPOP", "{%}none"},
			{"XADD", "{%}x", "*", "f", "v"}, {"XREAD", "STREAMS", "{%}x", "0-0"}, {"DEL", "{%}x"},
			{"EVAL", "redis.setresp(3); return {double=1.25}", "0"}, {"GET", "{%}h"},
		}
		for i := range 4 {
			for _, cmd := range cmds {
				pairs := [][2]*rawConn{{s2, d2}, {s3, d3}}
				if i%2 == 1 { // the RESP3 client first
					pairs[0], pairs[1] = pairs[1], pairs[0]
				}
				for _, pair := range pairs {
					mine, _ := withPrefix(cmd, p+"s")
					theirs, _ := withPrefix(cmd, p+"d")
					if cmd[0] == "XADD" {
						mine[2], theirs[2] = strconv.Itoa(i+1)+"-1", strconv.Itoa(i+1)+"-1"
					}
					g := strings.ReplaceAll(pair[0].do(mine...), p+"s", p+"d")
					if w := pair[1].do(theirs...); g != w {
						t.Errorf("loops %d, %q: through sluice %q, from the node %q", loops, cmd, g, w)
					}
				}
			}
		}
	}
}

// An EVALSHA that meets a node without its script is run there as EVAL,
// in the client's protocol: its reply is what the node gives that EVAL.
func TestPassthroughEvalshaReplayInEachProtocol(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		io := map[int]string{0: "l", -1: "g"}[loops] + map[bool]string{false: "2", true: "3"}[resp3]
		through := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		if resp3 {
			through.do("HELLO", "3")
		}
		body := "redis.setresp(3); redis.call('HSET', KEYS[1], 'f', '1'); return {redis.call('HGETALL', KEYS[1]), {double=1.5}, true, {big_number='12'}, ARGV[1]}"
		script := body + "--" + io // one script per subtest, so that no node has it yet
		sum := sha1.Sum([]byte(script))
		sha := hex.EncodeToString(sum[:])
		a := "ev:" + io + ":a"
		var b string
		for i := 0; ; i++ {
			b = "ev:" + io + ":b" + strconv.Itoa(i)
			if primaryOf(t, c, b).Addr != primaryOf(t, c, a).Addr {
				break
			}
		}
		if got := through.do("EVAL", script, "1", a, "v"); !strings.HasPrefix(got, "*5\r\n") {
			t.Fatalf("EVAL: %q", got)
		}
		got := through.do("EVALSHA", sha, "1", b, "w")
		straight := dialRaw(t, primaryOf(t, c, b+"d").Addr)
		if resp3 {
			straight.do("HELLO", "3")
		}
		want := straight.do("EVAL", script, "1", b+"d", "w")
		if got != want {
			t.Errorf("EVALSHA replayed: %q, want the node's EVAL %q", got, want)
		}
	})
}

// Commands sent to a slot's old owner follow MOVED to the new one in the
// client's protocol, alone, in a transaction and blocking.
func TestPassthroughMovedSlotInEachProtocol(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		io := map[int]string{0: "l", -1: "g"}[loops] + map[bool]string{false: "2", true: "3"}[resp3]
		through := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		if resp3 {
			through.do("HELLO", "3")
		}
		k := "{mv:" + io + "}"
		pipeline := [][]string{
			{"HGETALL", k + "h"}, {"ZSCORE", k + "z", "m"}, {"GET", k + "none"}, {"SMEMBERS", k + "s"},
			{"MULTI"}, {"HGETALL", k + "h"}, {"ZSCORE", k + "z", "m"}, {"GET", k + "none"}, {"EXEC"},
			{"BLPOP", k + "none", "0.01"},
			{"EVAL", "return redis.call('ZSCORE', KEYS[1], 'm')", "1", k + "z"},
		}
		for _, cmd := range [][]string{{"HSET", k + "h", "f", "1"}, {"ZADD", k + "z", "1.5", "m"}, {"SADD", k + "s", "7"}} {
			through.do(cmd...)
		}
		from := primaryOf(t, c, k)
		to := otherPrimary(c, from)
		if err := c.MoveSlot(context.Background(), slot.Of(k), to); err != nil {
			t.Fatal(err)
		}
		straight := dialRaw(t, to.Addr)
		if resp3 {
			straight.do("HELLO", "3")
		}
		through.send(pipeline...)
		straight.send(pipeline...)
		var got, want []string
		for range pipeline {
			got, want = append(got, through.read()), append(want, straight.read())
		}
		likeTheNode(t, "", got, want)
	})
}

// Long pipelines of RESP3's types, and replies longer than any buffer,
// cross the reads from the node at every byte: the replies are the
// node's all the same.
func TestPassthroughLongRESP3Replies(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		io := map[int]string{0: "l", -1: "g"}[loops] + map[bool]string{false: "2", true: "3"}[resp3]
		through := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		k := "{lr:" + io + "}"
		straight := dialRaw(t, primaryOf(t, c, k).Addr)
		if resp3 {
			through.do("HELLO", "3")
			straight.do("HELLO", "3")
		}
		hset := []string{"HSET", k + "h"}
		for i := range 3000 {
			hset = append(hset, "field"+strconv.Itoa(i), strings.Repeat("v", i%50))
		}
		through.do(hset...)
		through.do("ZADD", k+"z", "0.1", "m", "1e-300", "n")
		var pipeline [][]string
		for i := range 1500 {
			switch i % 6 {
			case 0:
				pipeline = append(pipeline, []string{"ZSCORE", k + "z", "m"})
			case 1:
				pipeline = append(pipeline, []string{"GET", k + "none"})
			case 2:
				pipeline = append(pipeline, []string{"EVAL", "redis.setresp(3); return {verbatim_string={format='txt', string=string.rep('x', tonumber(ARGV[1]))}}", "0", strconv.Itoa(i * 37)})
			case 3:
				pipeline = append(pipeline, []string{"EVAL", "redis.setresp(3); return {big_number=string.rep('9', tonumber(ARGV[1]))}", "0", strconv.Itoa(i)})
			case 4:
				pipeline = append(pipeline, []string{"ZRANGE", k + "z", "0", "-1", "WITHSCORES"})
			case 5:
				pipeline = append(pipeline, []string{"EVAL", "redis.setresp(3); return {map={a={set={b=true}}}, double=1}", "0"})
			}
			if i%500 == 0 {
				pipeline = append(pipeline, []string{"HGETALL", k + "h"})
			}
		}
		through.send(pipeline...)
		var got []string
		for range pipeline {
			got = append(got, through.read())
		}
		straight.send(pipeline...)
		for i := range pipeline {
			if w := straight.read(); got[i] != w {
				t.Fatalf("%q: through sluice %q..., from the node %q...", pipeline[i][:2], got[i][:min(len(got[i]), 80)], w[:min(len(w), 80)])
			}
		}
	})
}

// A command that blocks, and is then answered by another client's write,
// answers in its client's protocol: BZPOPMIN's score is a double in RESP3.
func TestPassthroughBlockedReplyInEachProtocol(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		io := map[int]string{0: "l", -1: "g"}[loops] + map[bool]string{false: "2", true: "3"}[resp3]
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		for _, tc := range []struct{ block, write []string }{
			{[]string{"BZPOPMIN", "%z", "5"}, []string{"ZADD", "%z", "1.5", "m"}},
			{[]string{"BZMPOP", "5", "1", "%z", "MAX"}, []string{"ZADD", "%z", "2.5", "m"}},
			{[]string{"XREAD", "BLOCK", "5000", "STREAMS", "%x", "$"}, []string{"XADD", "%x", "1-1", "f", "v"}},
			{[]string{"BLMPOP", "5", "1", "%l", "LEFT"}, []string{"RPUSH", "%l", "a"}},
		} {
			var got, want string
			for _, side := range []string{"s", "d"} {
				block, _ := withPrefix(tc.block, "{bl:"+io+side+"}")
				write, _ := withPrefix(tc.write, "{bl:"+io+side+"}")
				var blocked, writer *rawConn
				n := primaryOf(t, c, "{bl:"+io+side+"}")
				if side == "s" {
					blocked, writer = dialRaw(t, addr), dialRaw(t, addr)
				} else {
					blocked, writer = dialRaw(t, n.Addr), dialRaw(t, n.Addr)
				}
				if resp3 {
					blocked.do("HELLO", "3")
				}
				blocked.send(block)
				// The write wakes it only once it blocks on the node.
				node := dialRaw(t, n.Addr)
				waitUntil(t, "the command blocks on its node", func() bool {
					return !strings.Contains(node.do("INFO", "clients"), "blocked_clients:0\r\n")
				})
				writer.do(write...)
				g := strings.ReplaceAll(blocked.read(), "{bl:"+io+side+"}", "{bl}")
				if side == "s" {
					got = g
				} else {
					want = g
				}
			}
			if got != want {
				t.Errorf("%q: through sluice %q, from the node %q", tc.block, got, want)
			}
		}
	})
}
