package proxy_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// passthroughCommands are commands whose keys sit where few do (after a
// number of keys, after STREAMS, STORE or a subcommand) or whose replies
// have shapes of their own (maps, doubles, nested arrays, nulls), and the
// errors of their malformed forms. '%' is a prefix each side of the
// comparison fills in its own way; {%t} keys share a slot.
var passthroughCommands = [][]string{
	// Lists, numkeys first.
	{"RPUSH", "{%t}l1", "a", "b", "c", "a"},
	{"RPUSH", "{%t}l2", "x"},
	{"LMPOP", "2", "{%t}l1", "{%t}l2", "LEFT", "COUNT", "2"},
	{"LMPOP", "2", "{%t}none", "{%t}l2", "RIGHT"},
	{"LMPOP", "2", "{%t}none", "{%t}none2", "LEFT"},
	{"LMPOP", "2", "%a", "%b", "LEFT"},
	{"LMPOP", "0", "%a", "LEFT"},
	{"LMPOP", "5", "%a", "LEFT"},
	{"LMPOP", "x", "%a", "LEFT"},
	{"LMPOP", "1", "{%t}l1", "MIDDLE"},
	{"LMPOP", "1"},
	{"BLMPOP", "0.01", "2", "{%t}none", "{%t}l1", "RIGHT"},
	{"BLMPOP", "0.01", "1", "{%t}empty", "LEFT"},
	{"BLMPOP", "0.01", "2", "%a", "%b", "LEFT"},
	{"BLMPOP", "0", "0", "%a", "LEFT"},
	{"BLPOP", "{%t}l1", "-1"},
	{"BLPOP", "%a", "%b", "0.01"},
	{"BLPOP", "{%t}none", "0.01"},
	{"BLMOVE", "{%t}l1", "{%t}l9", "LEFT", "RIGHT", "0.01"},
	{"BLMOVE", "{%t}l1", "%l9", "LEFT", "RIGHT", "0.01"},
	{"BRPOPLPUSH", "{%t}none", "{%t}l9", "0.01"},
	{"RPUSH", "{%t}l1", "a", "b", "a"},
	{"LPOS", "{%t}l1", "a", "RANK", "-1"},
	{"LPOS", "{%t}l1", "a", "COUNT", "0", "MAXLEN", "10"},
	{"LPOS", "{%t}l1", "a", "RANK", "0"},
	// Sorted sets.
	{"ZADD", "{%t}z1", "1", "a", "2", "b", "3.5", "c"},
	{"ZADD", "{%t}z2", "2", "b", "4", "d"},
	{"ZADD", "{%t}z3", "1", "x", "2", "y"},
	{"ZINCRBY", "{%t}z3", "0.5", "x"},
	{"ZMSCORE", "{%t}z1", "a", "nosuch"},
	{"ZMPOP", "2", "{%t}z3", "{%t}z2", "MIN", "COUNT", "1"},
	{"ZMPOP", "1", "{%t}none", "MAX"},
	{"ZMPOP", "2", "%a", "%b", "MIN"},
	{"BZMPOP", "0.01", "1", "{%t}z3", "MAX"},
	{"BZMPOP", "0.01", "1", "{%t}zempty", "MAX"},
	{"BZPOPMIN", "{%t}z1", "0.01"},
	{"BZPOPMAX", "{%t}zempty", "0.01"},
	{"ZINTERCARD", "2", "{%t}z1", "{%t}z2", "LIMIT", "0"},
	{"ZINTERCARD", "2", "%a", "%b"},
	{"ZUNION", "2", "{%t}z1", "{%t}z2", "WITHSCORES"},
	{"ZUNIONSTORE", "{%t}dst", "2", "{%t}z1", "{%t}z2", "WEIGHTS", "1", "2", "AGGREGATE", "MAX"},
	{"ZUNIONSTORE", "%dst", "2", "{%t}z1", "{%t}z2"},
	{"ZDIFFSTORE", "{%t}dst", "2", "{%t}z1", "{%t}z2"},
	{"ZRANGESTORE", "{%t}dst2", "{%t}z1", "0", "-1"},
	{"ZRANGESTORE", "%dst2", "{%t}z1", "0", "-1"},
	{"ZRANGE", "{%t}dst", "0", "-1", "WITHSCORES"},
	{"ZADD", "{%t}one", "5", "m"},
	{"ZRANDMEMBER", "{%t}one", "1", "WITHSCORES"},
	{"ZRANDMEMBER", "{%t}one", "-2", "WITHSCORES"},
	{"ZRANDMEMBER", "{%t}one", "1", "WITHSCORES", "x"},
	{"ZADD", "{%t}z1", "XX", "NX", "1", "a"},
	// Sets: integers only, whose order is the same on every node.
	{"SADD", "{%t}s1", "1", "2", "3"},
	{"SADD", "{%t}s2", "2", "3", "4"},
	{"SINTERCARD", "2", "{%t}s1", "{%t}s2", "LIMIT", "1"},
	{"SINTERCARD", "2", "{%t}s1", "%x"},
	{"SINTER", "{%t}s1", "{%t}s2"},
	{"SMISMEMBER", "{%t}s1", "1", "9"},
	{"SADD", "{%t}sone", "m"},
	{"SRANDMEMBER", "{%t}sone"},
	{"SRANDMEMBER", "{%t}sone", "-3"},
	// Hashes.
	{"HSET", "{%t}h", "f", "v"},
	{"HRANDFIELD", "{%t}h", "1", "WITHVALUES"},
	{"HRANDFIELD", "{%t}h", "-2", "WITHVALUES"},
	{"HGETALL", "{%t}h"},
	// Streams.
	{"XADD", "{%t}x1", "1-1", "f", "v"},
	{"XADD", "{%t}x1", "2-1", "g", "w"},
	{"XADD", "{%t}x2", "1-1", "a", "b"},
	{"XREAD", "COUNT", "1", "STREAMS", "{%t}x1", "{%t}x2", "0", "0"},
	{"XREAD", "STREAMS", "%a", "%b", "0", "0"},
	{"XREAD", "STREAMS", "{%t}x1"},
	{"XREAD", "COUNT", "1"},
	{"XREAD", "BLOCK", "10", "STREAMS", "{%t}xempty", "$"},
	{"XREAD", "BLOCK", "10", "STREAMS", "%a", "%b", "0", "0"},
	{"XGROUP", "CREATE", "{%t}x1", "g", "0"},
	{"XGROUP", "CREATECONSUMER", "{%t}x1", "g", "c2"},
	{"XGROUP", "CREATE", "{%t}x1", "g", "0"},
	{"XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "{%t}x1", ">"},
	{"XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{%t}x1", ">"},
	{"XREADGROUP", "GROUP", "g", "c1", "STREAMS", "{%t}x1", "%x2", ">", ">"},
	{"XREADGROUP", "GROUP", "nosuch", "c1", "STREAMS", "{%t}x1", ">"},
	{"XREADGROUP", "GROUP", "g", "c1", "BLOCK", "10", "NOACK", "STREAMS", "{%t}x1", ">"},
	// Redis Cluster routes XREAD and XREADGROUP by the STREAMS that
	// follows their options, not by their key specs' first "streams" (a
	// group's or consumer's name here), and a line with an option it does
	// not know by no key at all.
	{"XGROUP", "CREATE", "{%t}x1", "streams", "0"},
	{"XGROUP", "CREATE", "{%t}x2", "streams", "0"},
	{"XREADGROUP", "COUNT", "1", "GROUP", "streams", "c", "STREAMS", "{%t}x1", "{%t}x2", ">", ">"},
	{"XREADGROUP", "NOACK", "GROUP", "streams", "streams", "STREAMS", "{%t}x1", "{%t}x2", "0", "0"},
	{"XREAD", "FOO", "STREAMS", "{%t}x1", "%x2", "0", "0"},
	{"XPENDING", "{%t}x1", "g"},
	{"XCLAIM", "{%t}x1", "g", "c2", "0", "1-1", "JUSTID"},
	{"XCLAIM", "{%t}x1", "g", "c2", "0", "1-1"},
	{"XAUTOCLAIM", "{%t}x1", "g", "c1", "0", "0-0", "COUNT", "10"},
	{"XAUTOCLAIM", "{%t}x1", "g", "c1", "0", "0-0", "COUNT", "10", "JUSTID"},
	{"XINFO", "STREAM", "{%t}x1"},
	{"XINFO", "GROUPS", "{%t}x1"},
	{"XINFO", "STREAM", "{%t}none"},
	{"XINFO", "STREAM"},
	{"XINFO", "NOSUCH", "x"},
	{"XINFO", "HELP"},
	{"XGROUP", "HELP"},
	// Geo.
	{"GEOADD", "{%t}g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"},
	{"GEOSEARCH", "{%t}g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC", "WITHCOORD", "WITHDIST"},
	{"GEOSEARCHSTORE", "{%t}gs", "{%t}g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC", "STOREDIST"},
	{"GEOSEARCHSTORE", "%gs", "{%t}g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"},
	{"GEORADIUS", "{%t}g", "15", "37", "200", "km", "STORE", "{%t}gr"},
	{"GEORADIUS", "{%t}g", "15", "37", "200", "km", "STORE", "%gr"},
	{"GEORADIUSBYMEMBER", "{%t}g", "Palermo", "200", "km", "STOREDIST", "{%t}gd"},
	// It stores into the last STORE or STOREDIST, which alone routes it.
	{"GEORADIUS", "{%t}g", "15", "37", "200", "km", "STORE", "%gr", "STORE", "{%t}gr"},
	{"GEORADIUSBYMEMBER", "{%t}g", "Palermo", "200", "km", "STOREDIST", "%gd", "STORE", "{%t}gs2"},
	{"GEORADIUS", "{%t}g", "15", "37", "200", "km", "STORE", "{%t}gr", "STOREDIST", "%gd"},
	{"ZRANGE", "{%t}gs2", "0", "-1"},
	{"GEORADIUS_RO", "{%t}g", "15", "37", "200", "km", "WITHDIST", "ASC"},
	{"GEOPOS", "{%t}g", "Palermo", "nosuch"},
	{"GEODIST", "{%t}g", "Palermo", "Catania"},
	{"ZRANGE", "{%t}gd", "0", "-1", "WITHSCORES"},
	// Bits.
	{"SETBIT", "{%t}b", "7", "1"},
	{"BITFIELD", "{%t}b", "INCRBY", "u8", "0", "1", "GET", "u4", "0"},
	{"BITFIELD_RO", "{%t}b", "GET", "u8", "0"},
	{"BITFIELD_RO", "{%t}b", "SET", "u8", "0", "1"},
	{"BITOP", "AND", "{%t}bd", "{%t}b", "{%t}b"},
	{"BITOP", "AND", "%bd", "{%t}b"},
	{"BITOP", "NOT", "{%t}bd", "{%t}b", "{%t}b"},
	{"BITPOS", "{%t}b", "1", "0", "-1", "BIT"},
	{"BITCOUNT", "{%t}b", "0", "-1", "BYTE"},
	// Strings, expiries, the key space.
	{"SET", "{%t}s1", "ohmytext"},
	{"SET", "{%t}s2", "mynewtext"},
	{"LCS", "{%t}s1", "{%t}s2"},
	{"LCS", "{%t}s1", "{%t}s2", "LEN"},
	{"LCS", "{%t}s1", "{%t}s2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"},
	{"LCS", "%a", "%b"},
	{"SET", "{%t}s9", "v", "KEEPTTL", "GET"},
	{"SET", "{%t}s9", "w", "GET"},
	// Hash tags as Redis reads them: an empty one, an unclosed one, the
	// first of two.
	{"SET", "%{}k", "v"},
	{"GET", "{}%k"},
	{"SET", "{%x", "v"},
	{"GET", "a{%b}c{d}"},
	{"SETRANGE", "{%t}s1", "2", "XX"},
	{"GETRANGE", "{%t}s1", "0", "3"},
	{"STRLEN", "{%t}s1"},
	{"GETEX", "{%t}s1", "EX", "100"},
	{"GETEX", "{%t}s1", "PERSIST"},
	{"GETEX", "{%t}s1", "EX", "0"},
	{"GETEX", "{%t}s1", "FOO"},
	{"GETDEL", "{%t}s2"},
	{"GETDEL", "{%t}s2"},
	{"EXPIREAT", "{%t}s1", "4102444800"},
	{"EXPIRETIME", "{%t}s1"},
	{"PEXPIRETIME", "{%t}s1"},
	{"EXPIRETIME", "%none"},
	{"TYPE", "{%t}s1"},
	{"TYPE", "{%t}x1"},
	{"TYPE", "%none"},
	{"OBJECT", "ENCODING", "{%t}s1"},
	{"OBJECT", "ENCODING", "%none"},
	{"OBJECT", "FREQ", "{%t}s1"},
	{"OBJECT", "REFCOUNT", "{%t}s1"},
	{"OBJECT", "ENCODING"},
	{"OBJECT", "HELP"},
	{"MEMORY", "USAGE", "{%t}s1"},
	{"MEMORY", "USAGE", "{%t}s1", "SAMPLES", "0"},
	{"MEMORY", "USAGE", "%none"},
	{"MEMORY", "USAGE"},
	{"MEMORY", "HELP"},
	{"RESTORE", "{%t}r", "0", "notapayload"},
	{"COPY", "{%t}s1", "{%t}c"},
	{"COPY", "{%t}s1", "{%t}c"},
	{"COPY", "{%t}s1", "{%t}c", "REPLACE"},
	{"COPY", "{%t}s1", "{%t}c", "DB", "1"},
	{"COPY", "{%t}s1", "%c"},
	{"RENAME", "{%t}c", "{%t}c2"},
	{"RENAMENX", "{%t}c2", "{%t}s1"},
	{"RENAME", "{%t}nosuch", "{%t}y"},
	{"RENAME", "%c2", "%c3"},
	{"RENAMENX", "%c2", "%c3"},
	{"MOVE", "{%t}s1", "1"},
	{"PFADD", "{%t}hll", "a", "b", "c"},
	{"PFADD", "{%t}hll2", "c", "d"},
	{"PFCOUNT", "{%t}hll", "{%t}hll2"},
	{"PFCOUNT", "%a", "%b"},
	{"PFMERGE", "{%t}hm", "{%t}hll", "{%t}hll2"},
	{"PFMERGE", "%hm", "{%t}hll"},
	{"PFCOUNT", "{%t}s1"},
	{"RPUSH", "{%t}sl", "3", "1", "2"},
	{"SORT", "{%t}sl"},
	{"SORT", "{%t}sl", "DESC", "STORE", "{%t}sorted"},
	{"SORT", "{%t}sl", "STORE", "%other"},
	{"SORT_RO", "{%t}sl", "LIMIT", "0", "2"},
	{"SORT", "{%t}sl", "BY", "nosort", "GET", "#"},
	{"SORT", "{%t}sl", "BY", "w_*"},
	// MIGRATE's key is its fourth argument, or those after KEYS when that
	// one is empty; port 1 refuses the node at once.
	{"MIGRATE", "127.0.0.1", "1", "%k", "0", "10"},
	{"MIGRATE", "127.0.0.1", "1", "{%t}s1", "0", "10"},
	{"MIGRATE", "127.0.0.1", "1", "{%t}s1", "0", "10", "COPY", "REPLACE", "AUTH", "keys"},
	{"MIGRATE", "127.0.0.1", "1", "", "0", "10", "KEYS", "%k", "%j"},
	{"MIGRATE", "127.0.0.1", "1", "", "0", "10", "KEYS", "{%t}k", "{%t}j"},
	{"MIGRATE", "127.0.0.1", "1", "", "0", "10", "AUTH2", "keys", "keys", "KEYS", "{%t}s1"},
	{"MIGRATE", "127.0.0.1", "1", "%k", "0", "10", "KEYS", "{%t}s1"},
	{"MIGRATE", "127.0.0.1", "1", "{%t}s1", "x", "10"},
	{"MIGRATE", "127.0.0.1", "1", "%k", "0"},
	// Keyless commands any node answers alike, and help texts.
	{"LOLWUT", "VERSION", "1"},
	{"CONFIG", "HELP"},
	{"PUBSUB", "HELP"},
	{"LATENCY", "HELP"},
	{"SLOWLOG", "HELP"},
	{"MODULE", "HELP"},
	{"COMMAND", "HELP"},
	// Commands sluice answers itself.
	{"ECHO", "x"},
	{"ECHO"},
	{"ECHO", "a", "b"},
	{"SELECT", "0"},
	{"SELECT", "1"},
	{"SELECT", "x"},
	{"SELECT", "99999999999"},
	{"SELECT", "00"},
	{"SELECT", "-0"},
	{"SELECT", "+0"},
	{"SELECT", " 0"},
	{"SELECT", "-1"},
	{"SELECT", ""},
	{"SELECT", "2147483648"},
	{"SELECT", "99999999999999999999"},
	{"ECHO", ""},
	{"PING", "a", "b"},
	{"SELECT"},
	{"READONLY"},
	{"READWRITE"},
	{"READONLY", "x"},
	{"COMMAND", "INFO", "lmpop", "xread", "nosuch"},
	{"COMMAND", "DOCS", "lmpop"},
	{"COMMAND", "GETKEYS", "LMPOP", "2", "%a", "%b", "LEFT"},
	{"COMMAND", "GETKEYS", "XREAD", "STREAMS", "%a", "%b", "0", "0"},
	{"COMMAND", "GETKEYS", "SORT", "%a", "STORE", "%b"},
	{"COMMAND", "GETKEYSANDFLAGS", "LMOVE", "%a", "%b", "LEFT", "RIGHT"},
	{"COMMAND", "GETKEYS", "GET"},
	{"COMMAND", "GETKEYS", "NOSUCH", "x"},
	{"COMMAND", "GETKEYS", "PING", "x"},
	// One name: a node lists its commands in the order of its own hash
	// table's seed.
	{"COMMAND", "LIST", "FILTERBY", "PATTERN", "xinfo|s*"},
	{"COMMAND", "NOSUCH"},
	{"COMMAND", "COUNT", "x"},
	{"CLIENT", "GETNAME"},
	{"CLIENT", "SETNAME", "n"},
	{"CLIENT", "GETNAME"},
	{"CLIENT", "SETNAME", "a b"},
	{"CLIENT", "NO-EVICT", "on"},
	{"CLIENT", "NO-EVICT", "maybe"},
	{"CLIENT", "REPLY", "maybe"},
	{"CLIENT", "LIST", "TYPE", "bogus"},
	{"CLIENT", "LIST", "ID", "abc"},
	{"CLIENT", "LIST", "foo"},
	{"CLIENT", "NOSUCH"},
	{"CLIENT"},
	{"CLIENT", "GETNAME", "x"},
	{"CLIENT", "ID", "x"},
	{"CLIENT", "INFO", "x"},
	{"CLIENT", "HELP", "x"},
	{"CLIENT", "SETNAME", ""},
	{"CLIENT", "GETNAME"},
	{"CLIENT", "LIST", "TYPE", "master"},
	{"CLIENT", "LIST", "ID", "999999"},
	{"CLIENT", "LIST", "ID"},
	{"CLIENT", "REPLY", "on", "x"},
	{"CLIENT", "REPLY", "on"},
	{"CLIENT", "NO-EVICT"},
	// Subcommands sluice refuses: a wrong number of arguments is Redis's
	// error first, as is a subcommand Redis does not have.
	{"CLIENT", "KILL"},
	{"CLIENT", "PAUSE"},
	{"CLIENT", "UNBLOCK"},
	{"CLIENT", "TRACKING"},
	{"CLIENT", "CACHING"},
	{"CLIENT", "GETREDIR", "x"},
	{"CLIENT", "UNPAUSE", "x"},
	{"CLIENT", "TRACKINGINFO", "x"},
	{"ACL", "NOSUCH"},
	{"ACL", "GETUSER"},
	{"ACL", "SETUSER"},
	{"ACL", "DELUSER"},
	{"ACL", "DRYRUN", "u"},
	{"ACL", "LOAD", "x"},
	{"ACL", "USERS", "x"},
	{"ACL", "HELP", "x"},
}

// passthroughLoose are the commands whose replies carry times (idle
// milliseconds, delivery times): their integers are not compared.
var passthroughLoose = [][]string{
	{"XPENDING", "{%t}x1", "g", "-", "+", "10"},
	{"XINFO", "STREAM", "{%t}x1", "FULL"},
	{"XINFO", "CONSUMERS", "{%t}x1", "g"},
	{"OBJECT", "IDLETIME", "{%t}s1"},
}

var integers = regexp.MustCompile(`:\d+\r\n`)

// TestPassthroughCommandsMatchTheCluster sends each of passthroughCommands
// and resp3Types (and CONFIG GET, which sluice reads to hide secrets)
// through sluice and straight to the primary of its first key's slot, as
// a cluster client would, in RESP2 and RESP3: the replies must be the
// same bytes, or sluice's refusal where the README says so.
func TestPassthroughCommandsMatchTheCluster(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		io := map[int]string{0: "l", -1: "g"}[loops] + map[bool]string{false: "2", true: "3"}[resp3]
		through := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops, AllowAdmin: true}))
		nodes := map[string]*rawConn{} // by address, as a cluster client keeps them
		node := func(sl int) *rawConn {
			n, err := c.Primary(context.Background(), max(sl, 0))
			if err != nil {
				t.Fatal(err)
			}
			conn := nodes[n.Addr]
			if conn == nil {
				conn = dialRaw(t, n.Addr)
				nodes[n.Addr] = conn
				if resp3 {
					conn.do("HELLO", "3")
				}
			}
			return conn
		}
		if resp3 {
			through.do("HELLO", "3")
		}
		// Both prefixes have the same length, so that a reply naming a
		// key through sluice reads as the cluster's once its prefix is
		// replaced.
		mine, theirs := "pc:s"+io+":", "pc:d"+io+":"
		compare := func(cmd []string, loose bool) {
			args, _ := withPrefix(cmd, mine)
			got := strings.ReplaceAll(through.do(args...), mine, theirs)
			args, sl := withPrefix(cmd, theirs)
			want := node(sl).do(args...)
			if loose {
				got, want = integers.ReplaceAllString(got, ":N\r\n"), integers.ReplaceAllString(want, ":N\r\n")
			}
			if got != want {
				t.Errorf("%q:\nthrough sluice   %q\nfrom the cluster %q", cmd, got, want)
			}
		}
		for _, cmd := range passthroughCommands {
			compare(cmd, false)
		}
		for _, cmd := range passthroughLoose {
			compare(cmd, true)
		}
		// RESTORE takes what DUMP gave, a payload any node takes.
		compare([]string{"SET", "{%t}dv", "v"}, false)
		compare([]string{"DUMP", "{%t}dv"}, false)
		args, sl := withPrefix([]string{"DUMP", "{%t}dv"}, theirs)
		dump := node(sl).do(args...)
		_, payload, _ := strings.Cut(strings.TrimSuffix(dump, "\r\n"), "\r\n")
		compare([]string{"RESTORE", "{%t}dv2", "0", payload}, false)
		compare([]string{"RESTORE", "{%t}dv2", "0", payload}, false)
		compare([]string{"GET", "{%t}dv2"}, false)
		// The reply types, on keys of their own (the tables reuse names).
		mine, theirs = "rt:s"+io+":", "rt:d"+io+":"
		for _, cmd := range resp3Types {
			compare(cmd, false)
		}
		for _, cmd := range [][]string{
			{"CONFIG", "GET", "maxmemory-policy"},
			{"CONFIG", "GET", "nosuch*"},
			{"CONFIG", "GET", "hash-max-listpack-e*"},
			{"CONFIG", "GET", "requirepass"},
		} {
			compare(cmd, false)
		}
	})
}
