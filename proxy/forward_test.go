package proxy_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
	"github.com/sluice-rl/sluice/router/slot"
)

// rawConn speaks RESP byte for byte, so that replies can be compared
// exactly.
type rawConn struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// send writes the commands in one write: a pipeline.
func (r *rawConn) send(cmds ...[]string) {
	r.t.Helper()
	var b []byte
	for _, args := range cmds {
		bs := make([][]byte, len(args))
		for i, a := range args {
			bs[i] = []byte(a)
		}
		b = router.AppendCommand(b, bs)
	}
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) read() string {
	r.t.Helper()
	b, err := reply.Read(r.br, nil)
	if err != nil {
		r.t.Fatalf("reading a reply: %v", err)
	}
	return string(b)
}

// endAndReadAll ends the client's side of the connection, as nc -N does,
// and reads every reply until the server closes its side.
func (r *rawConn) endAndReadAll() string {
	r.t.Helper()
	if err := r.c.(*net.TCPConn).CloseWrite(); err != nil {
		r.t.Fatal(err)
	}
	b, err := io.ReadAll(r.br)
	if err != nil {
		r.t.Fatalf("reading to the end: %v", err)
	}
	return string(b)
}

func (r *rawConn) do(args ...string) string {
	r.t.Helper()
	r.send(args)
	return r.read()
}

// newForwarding is a cluster router on c that has read the slot map and
// the cluster's command table.
func newForwarding(t *testing.T, c *clustertest.Cluster) *router.Cluster {
	t.Helper()
	r := newRouter(t, c)
	waitRouter(t, r)
	return r
}

// waitRouter waits until r has read the cluster's command table and its
// slot map: the table is read at connect, before the map, and a command
// routed in between is answered CLUSTERDOWN.
func waitRouter(t *testing.T, r *router.Cluster) {
	t.Helper()
	waitUntil(t, "the router reads the cluster's command table", func() bool { return r.Commands() != nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
}

// direct sends a command to the primary that owns slot sl (any primary
// for -1), as a cluster client would, and returns its raw reply.
func direct(t *testing.T, c *clustertest.Cluster, sl int, args ...string) string {
	t.Helper()
	return directIn(t, c, false, sl, args...)
}

// directIn is direct in RESP3 (HELLO 3 first) or RESP2.
func directIn(t *testing.T, c *clustertest.Cluster, resp3 bool, sl int, args ...string) string {
	t.Helper()
	if sl < 0 {
		sl = 0
	}
	n, err := c.Primary(context.Background(), sl)
	if err != nil {
		t.Fatal(err)
	}
	conn := dialRaw(t, n.Addr)
	if resp3 {
		conn.do("HELLO", "3")
	}
	return conn.do(args...)
}

// eachPathAndProtocol runs f as a subtest for each serving path (event
// loops, goroutines) and protocol (RESP2, RESP3).
func eachPathAndProtocol(t *testing.T, f func(t *testing.T, loops int, resp3 bool)) {
	for _, loops := range []int{0, -1} {
		for _, resp3 := range []bool{false, true} {
			name := map[int]string{0: "loops", -1: "goroutines"}[loops] + map[bool]string{false: "/RESP2", true: "/RESP3"}[resp3]
			t.Run(name, func(t *testing.T) { f(t, loops, resp3) })
		}
	}
}

// TestPassthroughMatchesTheCluster sends ordinary commands through sluice
// and the same commands straight to the primary that owns their keys: the
// replies must be the same bytes.
func TestPassthroughMatchesTheCluster(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		through := dialRaw(t, addr)
		if resp3 {
			if got := through.do("HELLO", "3"); !strings.HasPrefix(got, "%7\r\n") {
				t.Fatalf("HELLO 3: %q, want a map", got)
			}
		}
		io := map[int]string{0: "l", -1: "g"}[loops] + map[bool]string{false: "2", true: "3"}[resp3]
		// Each command runs twice, through sluice on keys of one prefix
		// and straight to the cluster on keys of another, so that both
		// see the same state; no reply names a key.
		for _, cmd := range [][]string{
			{"SET", "%a", "1"},
			{"GET", "%a"},
			{"GET", "%missing"},
			{"INCR", "%n"},
			{"INCRBY", "%n", "x"},
			{"HSET", "%h", "f", "v", "g", "w"},
			{"HGETALL", "%h"},
			{"GET", "%h"},
			{"RPUSH", "%l", "x", "y", "z"},
			{"LRANGE", "%l", "0", "-1"},
			{"LPOP", "%nolist"},
			{"SADD", "%s", "m"},
			{"SMEMBERS", "%s"},
			{"ZADD", "%z", "1.5", "one", "2", "two"},
			{"ZRANGE", "%z", "0", "-1", "WITHSCORES"},
			{"ZSCORE", "%z", "one"},
			{"EXPIRE", "%a", "100"},
			{"TYPE", "%h"},
			{"XADD", "%st", "1-1", "f", "v"},
			{"XRANGE", "%st", "-", "+"},
			{"EVAL", "return {ARGV[1], redis.call('GET', KEYS[1])}", "1", "%a", "v"},
			{"EVAL", "return 7", "0"},
			{"MSET", "{%t}x", "1", "{%t}y", "2"},
			{"MGET", "{%t}x", "{%t}y"},
			{"NOSUCHCOMMAND", "a"},
			{"GET"},
			{"OBJECT", "NOSUCH"},
			{"OBJECT", "ENCODING", "%h"},
			{"SET", "%a", "1", "EX", "-1"},
			{"EVAL", "return 1", "3", "%a"},
			{"ZUNIONSTORE", "%dst", "0", "%z"},
			{"SORT", "%l", "ALPHA", "LIMIT", "0", "2"},
			// SORT stores into its last STORE's key, the one Redis routes
			// by; SORT_RO has no STORE, its key alone routes it.
			{"SORT", "{%x}l", "STORE", "%other", "STORE", "{%x}dst"},
			{"SORT", "{%x}l", "STORE", "store", "{%x}dst"},
			{"SORT_RO", "{%x}l", "STORE", "%other"},
			{"ZSCORE", "%z", "one"},
			{"HRANDFIELD", "%nohash"},
			{"MGET", "{%t}x", "{%t}none"},
		} {
			args, _ := withPrefix(cmd, "pt:s"+io+":")
			got := through.do(args...)
			args, sl := withPrefix(cmd, "pt:d"+io+":")
			want := directIn(t, c, resp3, sl, args...)
			if got != want {
				t.Errorf("%q: through sluice %q, from the cluster %q", cmd, got, want)
			}
		}
	})
}

// TestPassthroughSplitsMultiKeyCommands checks the commands split per slot
// and merged in key order, and the ones refused as Redis Cluster refuses
// them.
func TestPassthroughSplitsMultiKeyCommands(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r})
	conn := dialRaw(t, addr)
	keys := []string{"sp:a", "sp:b", "sp:c", "sp:d", "sp:e"}
	slots := map[int]bool{}
	for _, k := range keys {
		slots[slot.Of(k)] = true
	}
	if len(slots) < 3 {
		t.Fatalf("the keys hash to %d slots; the test needs several", len(slots))
	}
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"MSET", "sp:a", "1", "sp:b", "2", "sp:c", "3", "sp:d", "4"}, "+OK\r\n"},
		{[]string{"MGET", "sp:d", "sp:a", "sp:e", "sp:c", "sp:b", "sp:a"}, "*6\r\n$1\r\n4\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n"},
		{[]string{"EXISTS", "sp:a", "sp:b", "sp:e", "sp:a"}, ":3\r\n"},
		{[]string{"TOUCH", "sp:a", "sp:e"}, ":1\r\n"},
		{[]string{"DEL", "sp:a", "sp:b", "sp:e"}, ":2\r\n"},
		{[]string{"UNLINK", "sp:c", "sp:d"}, ":2\r\n"},
		{[]string{"MGET", "sp:a", "sp:b", "sp:c"}, "*3\r\n$-1\r\n$-1\r\n$-1\r\n"},
		{[]string{"MSETNX", "sp:a", "1", "sp:b", "2"}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
		// Keys of several slots and a last key without its value: there is
		// no part to give that key to, and Redis Cluster refuses the line.
		{[]string{"MSET", "sp:a", "1", "sp:b"}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
		{[]string{"MSET", "sp:a", "1", "sp:b", "2", "sp:c"}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
		{[]string{"MGET", "sp:a", "sp:b"}, "*2\r\n$-1\r\n$-1\r\n"},
		{[]string{"SUNIONSTORE", "sp:a", "sp:b", "sp:c"}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
		{[]string{"EVAL", "return 1", "2", "sp:a", "sp:b"}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
	} {
		if got := conn.do(tc.cmd...); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.cmd, got, tc.want)
		}
	}
	// Refused with a clear error, and the connection goes on.
	for _, cmd := range [][]string{
		{"MONITOR"},
		{"DEBUG", "SLEEP", "0"},
		{"MEMORY", "STATS"},
	} {
		if got := conn.do(cmd...); !strings.HasPrefix(got, "-ERR sluice does not forward") {
			t.Errorf("%q: got %q, want an ERR saying sluice does not forward it", cmd, got)
		}
	}
}

// TestPassthroughInAPipeline mixes forwarded commands, bucket requests and
// commands sluice answers itself in one write: the replies come in order.
func TestPassthroughInAPipeline(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	// The loops with and without polling before they sleep (spinWait).
	for _, cfg := range []proxy.Config{{Loops: 0}, {Loops: 0, BusyPoll: 200 * time.Microsecond}, {Loops: -1}} {
		loops := fmt.Sprintf("%d, busy poll %v", cfg.Loops, cfg.BusyPoll)
		cfg.Decider, cfg.Forwarder = r, r
		addr := serveConfig(t, cfg)
		conn := dialRaw(t, addr)
		var cmds [][]string
		var want []string
		for i := range 50 {
			k := "pp:" + string(rune('a'+i%26)) + string(rune('0'+i/26))
			cmds = append(cmds,
				[]string{"SET", k, k},
				[]string{"THROTTLE", k, "10", "1", "1s"},
				[]string{"GET", k},
				[]string{"PING"},
				[]string{"MGET", k, "pp:none", k},
			)
			bulk := "$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n"
			want = append(want, "+OK\r\n", "", bulk, "+PONG\r\n", "*3\r\n"+bulk+"$-1\r\n"+bulk)
		}
		conn.send(cmds...)
		for i, w := range want {
			got := conn.read()
			if w == "" {
				if !strings.HasPrefix(got, "*5\r\n:0\r\n") {
					t.Fatalf("loops %s, reply %d (%q): got %q, want THROTTLE's allowed reply", loops, i, cmds[i], got)
				}
				continue
			}
			if got != w {
				t.Fatalf("loops %s, reply %d (%q): got %q, want %q", loops, i, cmds[i], got, w)
			}
		}
	}
}

// TestPassthroughFollowsAMovedSlot moves a key's slot to another primary
// behind sluice's back: the command is redirected and the caller never
// sees MOVED.
func TestPassthroughFollowsAMovedSlot(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r})
	conn := dialRaw(t, addr)
	key := "mv:key"
	if got := conn.do("SET", key, "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	ctx := context.Background()
	from := primaryOf(t, c, key)
	to := otherPrimary(c, from)
	if err := c.MoveSlot(ctx, slot.Of(key), to); err != nil {
		t.Fatal(err)
	}
	// A transaction sent to the old owner is discarded there (its
	// commands answer MOVED) and runs on the new one.
	conn.send([]string{"MULTI"}, []string{"GET", key}, []string{"APPEND", key, "w"}, []string{"EXEC"})
	for i, want := range []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n$1\r\nv\r\n:2\r\n"} {
		if got := conn.read(); got != want {
			t.Fatalf("transaction after the move, reply %d: %q, want %q", i, got, want)
		}
	}
	conn.do("SET", key, "v")
	for i := range 20 {
		if got := conn.do("GET", key); got != "$1\r\nv\r\n" {
			t.Fatalf("GET %d after the move: %q, want the value", i, got)
		}
	}
}

// TestPassthroughFansOut sends keyless commands that concern every
// primary: their replies are what one Redis holding all the keys would
// give.
func TestPassthroughFansOut(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	admin := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, AllowAdmin: true}))
	want := map[string]bool{}
	owners := map[string]bool{}
	for i := range 40 {
		k := "fo:" + strconv.Itoa(i)
		want[k] = true
		n := primaryOf(t, c, k)
		owners[n.Addr] = true
		if got := conn.do("SET", k, "v"); got != "+OK\r\n" {
			t.Fatalf("SET %s: %q", k, got)
		}
	}
	conn.do("RPUSH", "fo:list", "x")
	if len(owners) < 3 {
		t.Fatalf("the keys are on %d primaries; the test needs all 3", len(owners))
	}
	// sluice's own keys (its heartbeat) count too: sum the primaries'. The
	// heartbeat may write between the two readings: try a few times.
	dbsize := func() (got, want string) {
		var total int
		for _, n := range c.Nodes {
			size, err := n.Do(context.Background(), "DBSIZE").AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			total += int(size)
		}
		if total < 41 {
			t.Fatalf("the primaries hold %d keys, want at least 41", total)
		}
		return conn.do("DBSIZE"), ":" + strconv.Itoa(total) + "\r\n"
	}
	for i := 0; ; i++ {
		got, want := dbsize()
		if got == want {
			break
		}
		if i == 3 {
			t.Errorf("DBSIZE: %q, want %q, the primaries' sum", got, want)
			break
		}
	}
	// INFO's Keyspace section sums the primaries', after sluice's sections.
	for i := 0; ; i++ {
		info, size := conn.do("INFO"), conn.do("DBSIZE")
		want := "# Keyspace\r\ndb0:keys=" + strings.Trim(size, ":\r\n") + ","
		if strings.HasPrefix(info, "$") && strings.Contains(info, "# Server\r\n") && strings.Contains(info, want) {
			break
		}
		if i == 3 {
			t.Errorf("INFO: want sluice's sections and %q (DBSIZE %q), got %q", want, size, info)
			break
		}
	}
	keysOf := func(arr string) map[string]bool {
		elems := map[string]bool{}
		lines := strings.Split(arr, "\r\n")
		for i := 1; i+1 < len(lines); i += 2 {
			elems[lines[i+1]] = true
		}
		return elems
	}
	if got := keysOf(conn.do("KEYS", "fo:?")); len(got) != 10 {
		t.Errorf("KEYS fo:?: %d keys (%v), want 10", len(got), got)
	}
	// SCAN visits every primary, then answers cursor 0.
	seen := map[string]bool{}
	cursor, pages := "0", 0
	for {
		got := conn.do("SCAN", cursor, "MATCH", "fo:*", "COUNT", "7", "TYPE", "string")
		pages++
		head, rest, ok := strings.Cut(strings.TrimPrefix(got, "*2\r\n"), "\r\n")
		if !ok || !strings.HasPrefix(head, "$") {
			t.Fatalf("SCAN %s: %q", cursor, got)
		}
		cursor, rest, _ = strings.Cut(rest, "\r\n")
		for k := range keysOf(rest) {
			seen[k] = true
		}
		if cursor == "0" || pages > 1000 {
			break
		}
	}
	if len(seen) != len(want) || seen["fo:list"] {
		t.Errorf("SCAN saw %d keys in %d pages, want the %d strings", len(seen), pages, len(want))
	}
	// RANDOMKEY draws from every primary, not always the first one's keys:
	// 60 draws over 3 primaries all from one would be chance (3^-59).
	from := map[string]bool{}
	for range 60 {
		got := conn.do("RANDOMKEY")
		if !strings.HasPrefix(got, "$") || got == "$-1\r\n" {
			t.Fatalf("RANDOMKEY: %q, want a key", got)
		}
		from[primaryOf(t, c, strings.Split(got, "\r\n")[1]).Addr] = true
	}
	if len(from) < 2 {
		t.Errorf("RANDOMKEY: 60 keys from %d primary, want keys of every primary", len(from))
	}
	// A script loaded through sluice runs by EVALSHA on every primary.
	sha := conn.do("SCRIPT", "LOAD", "return redis.call('GET', KEYS[1])")
	if !strings.HasPrefix(sha, "$40\r\n") {
		t.Fatalf("SCRIPT LOAD: %q", sha)
	}
	sha = strings.Split(sha, "\r\n")[1]
	if got := conn.do("SCRIPT", "EXISTS", sha, "0000000000000000000000000000000000000000"); got != "*2\r\n:1\r\n:0\r\n" {
		t.Errorf("SCRIPT EXISTS: %q", got)
	}
	for k := range want {
		if got := conn.do("EVALSHA", sha, "1", k); got != "$1\r\nv\r\n" {
			t.Errorf("EVALSHA on %s: %q", k, got)
		}
	}
	// A node that lost the script (SCRIPT FLUSH, a promoted replica) runs
	// it all the same: sluice replays it as EVAL. One it never saw loaded
	// answers the node's NOSCRIPT.
	for _, n := range c.Nodes {
		if err := n.Do(context.Background(), "SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatal(err)
		}
	}
	for k := range want {
		if got := conn.do("EVALSHA", sha, "1", k); got != "$1\r\nv\r\n" {
			t.Errorf("EVALSHA on %s after SCRIPT FLUSH on the nodes: %q", k, got)
		}
	}
	if got := conn.do("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"); !strings.HasPrefix(got, "-NOSCRIPT") {
		t.Errorf("EVALSHA of a script never loaded: %q", got)
	}
	// A script's own error that begins NOSCRIPT is its answer: it ran, and
	// is not run again.
	mine := conn.do("SCRIPT", "LOAD", "redis.call('INCR', KEYS[1]) return redis.error_reply('NOSCRIPT mine')")
	if !strings.HasPrefix(mine, "$40\r\n") {
		t.Fatalf("SCRIPT LOAD: %q", mine)
	}
	if got := conn.do("EVALSHA", strings.Split(mine, "\r\n")[1], "1", "fo:ns"); got != "-NOSCRIPT mine\r\n" {
		t.Errorf("EVALSHA of a script answering its own NOSCRIPT error: %q", got)
	}
	if got := conn.do("GET", "fo:ns"); got != "$1\r\n1\r\n" {
		t.Errorf("after a script answered its own NOSCRIPT error, its INCR: %q, want 1 (run once)", got)
	}
	// Commands that change every primary need --allow-admin.
	if got := conn.do("FLUSHALL"); !strings.Contains(got, "only with --allow-admin: it changes every primary") {
		t.Errorf("FLUSHALL without --allow-admin: %q", got)
	}
	// CONFIG GET too, but it changes nothing, and the refusal says so.
	if got := conn.do("CONFIG", "GET", "maxmemory"); !strings.Contains(got, "only with --allow-admin: it reads a primary's settings") {
		t.Errorf("CONFIG GET without --allow-admin: %q", got)
	}
	if got := admin.do("FLUSHALL"); got != "+OK\r\n" {
		t.Errorf("FLUSHALL with --allow-admin: %q", got)
	}
	// (sluice's heartbeat may write its key again at any time: count ours.)
	exists := []string{"EXISTS", "fo:list"}
	for k := range want {
		exists = append(exists, k)
	}
	if got := conn.do(exists...); got != ":0\r\n" {
		t.Errorf("EXISTS of every key after FLUSHALL: %q", got)
	}
	if got := admin.do("CONFIG", "GET", "maxmemory-policy"); !strings.HasPrefix(got, "*2\r\n$16\r\nmaxmemory-policy\r\n") {
		t.Errorf("CONFIG GET: %q", got)
	}
}

// TestPassthroughTransactions runs transactions through sluice and the
// same ones on a connection to the primary that owns their slot: the
// replies must be the same bytes, EXECABORT and errors included.
func TestPassthroughTransactions(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1, 3} {
		resp3 := loops == 3 // RESP3, on the loops
		through := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops % 3}))
		// The same commands on keys of the same length, another tag each.
		tag, other := "{tx"+strconv.Itoa(loops+1)+"}", "{ty"+strconv.Itoa(loops+1)+"}"
		node := primaryOf(t, c, other)
		straight := dialRaw(t, node.Addr)
		if resp3 {
			through.do("HELLO", "3")
			straight.do("HELLO", "3")
		}
		for _, script := range [][][]string{
			{{"MULTI"}, {"SET", "%a", "1"}, {"INCR", "%n"}, {"GET", "%a"}, {"PING"}, {"ECHO", "e"}, {"EXEC"}},
			{{"MULTI"}, {"SET", "%a", "x"}, {"INCR", "%a"}, {"GET", "%a"}, {"EXEC"}},
			{{"MULTI"}, {"SET", "%a", "1"}, {"NOSUCH"}, {"EXEC"}, {"GET", "%a"}},
			{{"MULTI"}, {"GET"}, {"SET", "%a", "2"}, {"EXEC"}},
			{{"MULTI"}, {"WATCH", "%a"}, {"EXEC"}},
			{{"EXEC"}, {"DISCARD"}, {"MULTI"}, {"MULTI"}, {"SET", "%a", "3"}, {"DISCARD"}, {"GET", "%a"}},
			{{"MULTI"}, {"EXEC"}},
			{{"MULTI"}, {"BLPOP", "%l", "0"}, {"RPUSH", "%l", "v"}, {"EXEC"}},
			{{"HSET", "%h", "f", "1.5"}, {"MULTI"}, {"HGETALL", "%h"}, {"HINCRBYFLOAT", "%h", "f", "1"}, {"GET", "%none"}, {"EXEC"}},
			// SORT's keys are not all in its key specs; a line with a bad
			// number of keys is queued, and refused by EXEC.
			{{"RPUSH", "%s", "b", "a"}, {"MULTI"}, {"SORT", "%s", "ALPHA"}, {"SORT", "%s", "STORE", "%d"}, {"EXEC"}},
			{{"MULTI"}, {"EVAL", "return 1", "5", "%a"}, {"GET", "%a"}, {"EXEC"}},
		} {
			on := func(tag string) [][]string {
				var cmds [][]string
				for _, cmd := range script {
					args := make([]string, len(cmd))
					for i, a := range cmd {
						args[i] = strings.ReplaceAll(a, "%", tag)
					}
					cmds = append(cmds, args)
				}
				return cmds
			}
			// Through sluice in one pipeline, straight one by one.
			cmds, mirror := on(tag), on(other)
			through.send(cmds...)
			for i, cmd := range cmds {
				got := through.read()
				want := strings.ReplaceAll(straight.do(mirror[i]...), other, tag)
				if got != want {
					t.Errorf("loops %d, %q in %q: through sluice %q, from the node %q", loops, cmd, script, got, want)
				}
			}
		}
	}
	// What a cluster refuses: keys of two slots, and sluice's own commands.
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r})
	conn := dialRaw(t, addr)
	for _, step := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", "{a}x", "1"}, "+QUEUED\r\n"},
		{[]string{"SET", "{b}x", "1"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
		{[]string{"GET", "{a}x"}, "$-1\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"MSET", "{a}x", "1", "{b}x", "1"}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"THROTTLE", "k", "10", "1", "1s"}, "-ERR sluice cannot run 'throttle' inside a transaction\r\n"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"UNWATCH"}, "+OK\r\n"},
	} {
		if got := conn.do(step.cmd...); got != step.want {
			t.Errorf("%q: got %q, want %q", step.cmd, got, step.want)
		}
	}
	// CLIENT LIST shows a client in a transaction (flags=x), and no more
	// once it ends.
	other := dialRaw(t, addr)
	conn.do("MULTI")
	if list := other.do("CLIENT", "LIST"); strings.Count(list, "flags=x") != 1 {
		t.Errorf("CLIENT LIST during another client's MULTI: %q", list)
	}
	conn.do("DISCARD")
	if list := other.do("CLIENT", "LIST"); strings.Contains(list, "flags=x") {
		t.Errorf("CLIENT LIST after DISCARD: %q", list)
	}
}

// TestPassthroughBlockingCommands waits in BLPOP through sluice while
// other clients go on, and a push through sluice wakes it; a client that
// goes away stops its wait at the node; --max-blocking bounds the waits.
func TestPassthroughBlockingCommands(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1, MaxBlocking: 2})
	waitRouter(t, r)
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		list := "bl:" + strconv.Itoa(-loops)
		waiter, other := dialRaw(t, addr), dialRaw(t, addr)
		waiter.send([]string{"BLPOP", list, "0"})
		// The wait holds up no one: the other client's commands, on the
		// same node and others, are answered meanwhile.
		for i := range 20 {
			k := list + ":" + strconv.Itoa(i)
			if got := other.do("SET", k, "v"); got != "+OK\r\n" {
				t.Fatalf("SET while a BLPOP waits: %q", got)
			}
		}
		if got := other.do("RPUSH", list, "x"); got != ":1\r\n" && got != ":0\r\n" {
			t.Fatalf("RPUSH: %q", got)
		}
		want := "*2\r\n$" + strconv.Itoa(len(list)) + "\r\n" + list + "\r\n$1\r\nx\r\n"
		if got := waiter.read(); got != want {
			t.Errorf("loops %d: BLPOP: %q, want %q", loops, got, want)
		}
		// A timeout answers the null array the node sends.
		if got := waiter.do("BLPOP", list, "0.05"); got != "*-1\r\n" {
			t.Errorf("loops %d: BLPOP that times out: %q", loops, got)
		}
	}
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r})
	blocked := blpopWaiters(t, c, "bl:gone")
	// Two waits fill --max-blocking 2: a third is refused at once.
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	a.send([]string{"BLPOP", "bl:gone", "0"})
	b.send([]string{"BLPOP", "bl:gone", "0"})
	waitUntil(t, "both BLPOP wait at the node", func() bool { return blocked() == 2 })
	if got := dialRaw(t, addr).do("BLPOP", "bl:gone", "0"); !strings.Contains(got, "--max-blocking") {
		t.Errorf("a third BLPOP with --max-blocking 2: %q", got)
	}
	// XREAD and XREADGROUP block only with BLOCK: without it they answer
	// at once, not counted against --max-blocking.
	d := dialRaw(t, addr)
	d.do("XADD", "bl:{s}", "1-1", "f", "v")
	d.do("XGROUP", "CREATE", "bl:{s}", "block", "0")
	xread := []string{"XREAD", "COUNT", "1", "STREAMS", "bl:{s}", "0"}
	if got, want := d.do(xread...), direct(t, c, slot.Of("bl:{s}"), xread...); got != want {
		t.Errorf("XREAD while --max-blocking is full: %q, want %q", got, want)
	}
	// A group named "block" is no BLOCK option.
	if got := d.do("XREADGROUP", "GROUP", "block", "c", "COUNT", "1", "STREAMS", "bl:{s}", ">"); !strings.Contains(got, "1-1") {
		t.Errorf("XREADGROUP while --max-blocking is full: %q, want the entry 1-1", got)
	}
	if got := d.do("XREAD", "BLOCK", "0", "STREAMS", "bl:{s}", "$"); !strings.Contains(got, "--max-blocking") {
		t.Errorf("XREAD BLOCK while --max-blocking is full: %q", got)
	}
	// Redis takes XREADGROUP's options in any order before STREAMS: BLOCK
	// before GROUP blocks, a consumer named "block" after NOACK does not.
	d.do("XGROUP", "CREATE", "bl:{s}", "g", "$")
	if got := d.do("XREADGROUP", "BLOCK", "0", "GROUP", "g", "c", "STREAMS", "bl:{s}", ">"); !strings.Contains(got, "--max-blocking") {
		t.Errorf("XREADGROUP BLOCK 0 GROUP ... while --max-blocking is full: %q", got)
	}
	history := []string{"XREADGROUP", "NOACK", "GROUP", "block", "block", "STREAMS", "bl:{s}", "0"}
	if got, want := d.do(history...), direct(t, c, slot.Of("bl:{s}"), history...); got != want {
		t.Errorf("XREADGROUP NOACK GROUP block block while --max-blocking is full: %q, want %q", got, want)
	}
	// Clients that go away stop waiting at the node.
	a.c.Close()
	b.c.Close()
	waitUntil(t, "no BLPOP waits at the node once their clients left", func() bool { return blocked() == 0 })
	// So do a goroutine path's clients, which read nothing while they
	// wait, also one that sent more after its BLPOP; and the element
	// pushed next is not popped for a client that left.
	addr = serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: -1})
	a, b = dialRaw(t, addr), dialRaw(t, addr)
	a.send([]string{"BLPOP", "bl:gone", "0"})
	b.send([]string{"BLPOP", "bl:gone", "0"}, []string{"PING"})
	waitUntil(t, "both BLPOP wait at the node (goroutine path)", func() bool { return blocked() == 2 })
	a.c.Close()
	b.c.Close()
	waitUntil(t, "no BLPOP waits at the node once their clients left (goroutine path)", func() bool { return blocked() == 0 })
	if got := d.do("RPUSH", "bl:gone", "x"); got != ":1\r\n" {
		t.Errorf("RPUSH after the waiters left: %q, want :1 (the element stays)", got)
	}
	if got := d.do("LLEN", "bl:gone"); got != ":1\r\n" {
		t.Errorf("LLEN after the waiters left: %q, want :1", got)
	}
}

// TestPassthroughBlockingFollowsASlotMove moves the slot of a key that
// clients wait on through sluice: the old owner answers its waiters MOVED
// (as a client connected to it sees), which sluice follows, so each waits
// again at the new owner and gets what is pushed there, on both serving
// paths and for a stream read as well as a list pop.
func TestPassthroughBlockingFollowsASlotMove(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		k := "{blmove" + strconv.Itoa(-loops) + "}"
		list, stream := k+"l", k+"s"
		from := primaryOf(t, c, list)
		to := otherPrimary(c, from)
		// waiting counts n's blocked clients (flag b) whose command is cmd.
		waiting := func(n *clustertest.Node, cmd string) int {
			l, err := n.Do(ctx, "CLIENT", "LIST").ToString()
			if err != nil {
				t.Fatal(err)
			}
			w := 0
			for _, line := range strings.Split(l, "\n") {
				if strings.Contains(line, " flags=b ") && strings.Contains(line, " cmd="+cmd+" ") {
					w++
				}
			}
			return w
		}
		direct := dialRaw(t, from.Addr)
		direct.send([]string{"BLPOP", list, "0"})
		pop, read := dialRaw(t, addr), dialRaw(t, addr)
		pop.send([]string{"BLPOP", list, "0"})
		read.send([]string{"XREAD", "BLOCK", "0", "STREAMS", stream, "$"})
		waitUntil(t, "the commands wait at the old owner", func() bool {
			return waiting(from, "blpop") == 2 && waiting(from, "xread") == 1
		})
		if err := c.MoveSlot(ctx, slot.Of(list), to); err != nil {
			t.Fatal(err)
		}
		if got := direct.read(); !strings.HasPrefix(got, "-MOVED ") {
			t.Fatalf("loops %d: a client of the old owner: %q, want MOVED", loops, got)
		}
		waitUntil(t, "the commands wait at the new owner", func() bool {
			return waiting(to, "blpop") == 1 && waiting(to, "xread") == 1
		})
		other := dialRaw(t, addr)
		if got := other.do("RPUSH", list, "x"); got != ":0\r\n" && got != ":1\r\n" {
			t.Fatalf("loops %d: RPUSH: %q", loops, got)
		}
		if got, want := pop.read(), "*2\r\n$"+strconv.Itoa(len(list))+"\r\n"+list+"\r\n$1\r\nx\r\n"; got != want {
			t.Errorf("loops %d: BLPOP moved while it waits: %q, want %q", loops, got, want)
		}
		if got := other.do("XADD", stream, "1-1", "f", "v"); got != "$3\r\n1-1\r\n" {
			t.Fatalf("loops %d: XADD: %q", loops, got)
		}
		if got := read.read(); !strings.Contains(got, "1-1") {
			t.Errorf("loops %d: XREAD BLOCK moved while it waits: %q, want the entry 1-1", loops, got)
		}
	}
}

// clientIDs are the ids of the clients in a node's CLIENT LIST whose last
// command is cmd. The list may come as a RESP3 verbatim string, which
// rueidis leaves prefixed with its format ("txt:"), so the id is looked
// for by name, not taken from the line's first field.
func clientIDs(list, cmd string) []string {
	var ids []string
	for _, line := range strings.Split(strings.TrimPrefix(list, "txt:"), "\n") {
		if !strings.Contains(line, "cmd="+cmd) {
			continue
		}
		for _, f := range strings.Fields(line) {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// blpopWaiters returns a count of the clients waiting in BLPOP at key's
// primary.
func blpopWaiters(t *testing.T, c *clustertest.Cluster, key string) func() int {
	t.Helper()
	ctx := context.Background()
	node := primaryOf(t, c, key)
	return func() int {
		list, err := node.Do(ctx, "CLIENT", "LIST").ToString()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(list, "cmd=blpop")
	}
}

// TestPassthroughBlockingInAPipeline pipelines a blocking command among
// others, on both serving paths: the commands before it must run before
// it, and those after it once it is answered, as a Redis node runs them.
// It goes on a connection of its own, where it raced the others to the
// node and lost a few times in ten; so each pipeline is sent many times,
// and every time the replies must be the bytes the node answers the same
// pipeline sent to it directly.
func TestPassthroughBlockingInAPipeline(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		k := "bp:" + strconv.Itoa(-loops)
		node := primaryOf(t, c, k)
		// A node times a blocked client out in its cron, 10 times a
		// second by default: a BLPOP of 0.01 s took up to 0.1 s, in three
		// of the pipelines, each sent 30 times. At hz 500 it takes about
		// what it says; the replies and their order are the same.
		if err := node.Do(context.Background(), "CONFIG", "SET", "hz", "500").Error(); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name    string
			resp3   bool
			cmds    [][]string
			replies int
		}{
			// The push before BLPOP has run: it takes the element at once.
			{"before", false, [][]string{{"RPUSH", k, "a"}, {"BLPOP", k, "0.2"}, {"DEL", k}}, 3},
			{"before, RESP3", true, [][]string{{"RPUSH", k, "a"}, {"BLPOP", k, "0.2"}, {"DEL", k}}, 3},
			// The push after BLPOP waits for it: BLPOP times out.
			{"after", false, [][]string{{"DEL", k}, {"BLPOP", k, "0.01"}, {"RPUSH", k, "b"}, {"LPOP", k}}, 4},
			{"after, RESP3", true, [][]string{{"DEL", k}, {"BLPOP", k, "0.01"}, {"RPUSH", k, "b"}, {"LPOP", k}}, 4},
			// Two in a row, each in its turn.
			{"two", false, [][]string{{"RPUSH", k, "a", "b"}, {"BLPOP", k, "0.2"}, {"BRPOP", k, "0.2"}, {"BLPOP", k, "0.01"}, {"RPUSH", k, "c"}, {"DEL", k}}, 6},
			// Silenced replies keep their places.
			{"reply off", false, [][]string{{"CLIENT", "REPLY", "OFF"}, {"RPUSH", k, "a"}, {"BLPOP", k, "0.2"}, {"CLIENT", "REPLY", "ON"}, {"LPOP", k}}, 2},
			// Inside MULTI it does not block: EXEC runs it at once.
			{"multi", false, [][]string{{"MULTI"}, {"BLPOP", k, "0"}, {"EXEC"}, {"RPUSH", k, "a"}, {"DEL", k}}, 5},
		} {
			through, straight := dialRaw(t, addr), dialRaw(t, node.Addr)
			if tc.resp3 {
				through.do("HELLO", "3")
				straight.do("HELLO", "3")
			}
			replies := func(conn *rawConn) string {
				conn.send(tc.cmds...)
				var got []string
				for range tc.replies {
					got = append(got, conn.read())
				}
				return strings.Join(got, "")
			}
			want := replies(straight)
			for i := range 30 {
				if got := replies(through); got != want {
					t.Fatalf("loops %d, %s, try %d: %q\n got %q\nwant %q", loops, tc.name, i, tc.cmds, got, want)
				}
			}
		}
		// QUIT after a blocking command comes after its reply.
		through := dialRaw(t, addr)
		through.send([]string{"RPUSH", k, "a"}, []string{"BLPOP", k, "0.2"}, []string{"QUIT"})
		want := []string{":1\r\n", "*2\r\n$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n$1\r\na\r\n", "+OK\r\n"}
		for _, w := range want {
			if got := through.read(); got != w {
				t.Errorf("loops %d: RPUSH, BLPOP, QUIT: %q, want %q", loops, got, w)
			}
		}
		if _, err := through.br.ReadByte(); err == nil {
			t.Errorf("loops %d: the connection stays open after QUIT", loops)
		}
	}
}

// The replies written before a blocking command waits are under the hard
// output limit too: a reply past it closes the client, which never
// blocks. Both serving paths.
func TestPassthroughBlockingAfterAReplyPastTheHardLimit(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, OutputLimit: proxy.OutputLimit{Hard: 64 << 10}}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		conn.send([]string{"ECHO", strings.Repeat("x", 100<<10)}, []string{"BLPOP", "bh:" + t.Name(), "0.1"}, []string{"PING"})
		conn.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if got, err := io.ReadAll(conn.br); len(got) > 0 || err != nil {
			t.Errorf("%d bytes (%.40q...), %v; want the client closed unanswered", len(got), got, err)
		}
	})
}

// A reply past the hard output limit closes the client before a
// subscription command pipelined after it is taken, and so before what
// follows: the SET after it is not run, as Redis runs nothing more of a
// client it closes. A forwarded reply (GET): on a goroutine the client was
// closed as the reply came in, but the rest of its pipeline was still
// taken, and the SET ran. A reply sluice makes itself (ECHO) is queued at
// once, and the SUBSCRIBE after it was taken in the same pass: a
// subscriber (whose messages have a bound of their own) by the time the
// replies were written, the client got the reply whole, though it was
// queued while the client was a normal one, as Redis checks it. Both
// serving paths, RESP3 (a SET is allowed after a SUBSCRIBE).
func TestPassthroughSubscribeAfterAReplyPastTheHardLimit(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	big := strings.Repeat("x", 100<<10)
	for _, tt := range []struct {
		name  string
		reply func(t *testing.T, conn *rawConn, key string) []string // the command of the big reply
	}{
		{"forwarded", func(t *testing.T, conn *rawConn, key string) []string {
			if got := conn.do("SET", key+":big", big); got != "+OK\r\n" {
				t.Fatalf("SET: %q", got)
			}
			return []string{"GET", key + ":big"}
		}},
		{"local", func(*testing.T, *rawConn, string) []string { return []string{"ECHO", big} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, OutputLimit: proxy.OutputLimit{Hard: 64 << 10}}, func(t *testing.T, cfg proxy.Config) {
				key := "{hardsub}" + t.Name()
				conn := dialRaw(t, serveConfig(t, cfg))
				if got := conn.do("HELLO", "3"); !strings.HasPrefix(got, "%") {
					t.Fatalf("HELLO 3: %.40q", got)
				}
				conn.send(tt.reply(t, conn, key), []string{"SUBSCRIBE", "hardsub:" + tt.name}, []string{"SET", key, "1"})
				conn.c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if got, err := io.ReadAll(conn.br); len(got) > 0 || err != nil {
					t.Errorf("%d bytes (%.40q...), %v; want the client closed unanswered", len(got), got, err)
				}
				if got, err := primaryOf(t, c, key).Do(context.Background(), "EXISTS", key).AsInt64(); err != nil || got != 0 {
					t.Errorf("EXISTS %s: %d, %v; want 0: the SET after the closing reply ran", key, got, err)
				}
			})
		})
	}
}

// TestPassthroughBlockingBeforeTheClientsEnd sends blocking commands the
// node can answer at once, and then ends its side of the connection (as
// nc -N does): Redis runs what a client sent before its end, so the
// replies are the node's own. Through sluice the end reached the commands
// before their nodes, and they were answered an error instead; and on a
// loop an UNSUBSCRIBE after them, which waits for the commands before it,
// was dropped with what followed it, the client being at its end.
func TestPassthroughBlockingBeforeTheClientsEnd(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		k := "{be" + strconv.Itoa(-loops) + "}"
		node := primaryOf(t, c, k)
		for _, cmds := range [][][]string{
			{{"BLPOP", k, "0"}},
			{{"PING"}, {"BRPOP", k, "0"}},
			{{"BLMOVE", k, k + "to", "LEFT", "RIGHT", "0"}},
			{{"XREAD", "BLOCK", "0", "STREAMS", k + "s", "0"}},
			{{"BLPOP", k, "0"}, {"GET", k + "m"}, {"UNSUBSCRIBE", "ue"}, {"SET", k + "m", "1"}, {"GET", k + "m"}},
		} {
			replies := func(addr string) string {
				for _, setup := range [][]string{{"RPUSH", k, "a"}, {"XADD", k + "s", "1-1", "f", "v"}} {
					if err := node.Do(ctx, setup...).Error(); err != nil {
						t.Fatal(err)
					}
				}
				defer node.Do(ctx, "DEL", k, k+"to", k+"s", k+"m")
				conn := dialRaw(t, addr)
				conn.send(cmds...)
				return conn.endAndReadAll()
			}
			want := replies(node.Addr)
			for i := range 5 {
				if got := replies(addr); got != want {
					t.Fatalf("loops %d, %q, try %d:\n got %q\nwant %q", loops, cmds, i, got, want)
				}
			}
		}
	}
}

// TestPassthroughBlockingBeforeALongEnd pipelines a blocking command, more
// behind it than a read takes, and its end: Redis reads it all, answers
// what follows a command answered at once, and frees the client if the
// command would wait, its replies before it delivered. On a loop, which
// reads no further while a blocking command is out, the end was taken
// for an EOF read: nothing after the command ran, and the client was
// closed with its input unread, which resets the connection (and can drop
// the replies on their way).
func TestPassthroughBlockingBeforeALongEnd(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	long := strings.Repeat("e", 70000)
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		k := "{bz" + strconv.Itoa(-loops) + "}"
		node := primaryOf(t, c, k)
		for _, full := range []bool{true, false} {
			replies := func(addr string) string {
				if full {
					if err := node.Do(ctx, "RPUSH", k, "a").Error(); err != nil {
						t.Fatal(err)
					}
				}
				defer node.Do(ctx, "DEL", k, k+"n")
				conn := dialRaw(t, addr)
				conn.send([]string{"PING"}, []string{"BLPOP", k, "0"}, []string{"ECHO", long}, []string{"INCR", k + "n"})
				out := conn.endAndReadAll()
				n, _ := node.Do(ctx, "GET", k+"n").ToString()
				return fmt.Sprintf("%d bytes ending %q, then %s is %q", len(out), out[max(0, len(out)-30):], k+"n", n)
			}
			want := replies(node.Addr)
			for i := range 3 {
				if got := replies(addr); got != want {
					t.Errorf("loops %d, list with an element %v, try %d:\n got %s\nwant %s", loops, full, i, got, want)
					break
				}
			}
		}
	}
}

// TestPassthroughBlockedClientThatEnds pipelines a blocking command and an
// INCR, and ends the connection: Redis runs the INCR only if the blocking
// command did not wait, for a blocked client whose end it reads is freed,
// unanswered. Through sluice the INCR of a client that left during its
// wait ran (goroutines), one after a command answered at once did not
// (loops), and a wait given up was answered an error.
func TestPassthroughBlockedClientThatEnds(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		k := "{bx" + strconv.Itoa(-loops) + "}"
		node := primaryOf(t, c, k)
		blocked := func() int {
			list, err := node.Do(ctx, "CLIENT", "LIST").ToString()
			if err != nil {
				t.Fatal(err)
			}
			return strings.Count(list, "flags=b")
		}
		observer := dialRaw(t, addr)
		for _, tc := range []struct {
			name string
			full bool // the list has an element, so BLPOP does not wait
			// wait: the client waits at the node, then closes (else it
			// shuts its side at once)
			wait bool
		}{{"answered at once", true, false}, {"would wait", false, false}, {"left while waiting", false, true}} {
			replies := func(addr string) string {
				if tc.full {
					if err := node.Do(ctx, "RPUSH", k, "a").Error(); err != nil {
						t.Fatal(err)
					}
				}
				defer node.Do(ctx, "DEL", k, k+"n")
				conn := dialRaw(t, addr)
				conn.send([]string{"BLPOP", k, "0"}, []string{"INCR", k + "n"})
				var out []byte
				if tc.wait {
					waitUntil(t, "BLPOP waits at the node", func() bool { return blocked() == 1 })
					conn.c.Close()
					if addr != node.Addr {
						waitUntil(t, "sluice lets the client go", func() bool {
							return strings.Count(observer.do("CLIENT", "LIST"), "id=") == 1
						})
					}
					waitUntil(t, "BLPOP stops waiting", func() bool { return blocked() == 0 })
				} else {
					out = []byte(conn.endAndReadAll())
				}
				n, _ := node.Do(ctx, "GET", k+"n").ToString()
				return fmt.Sprintf("%q, then %s is %q", out, k+"n", n)
			}
			want := replies(node.Addr)
			for i := range 3 {
				if got := replies(addr); got != want {
					t.Errorf("loops %d, %s, try %d:\n got %s\nwant %s", loops, tc.name, i, got, want)
					break
				}
			}
		}
	}
}

// TestPassthroughBlockedClientIsListed waits in BLPOP through sluice: as a
// node does, sluice lists the client with flag b in CLIENT LIST and counts
// it in INFO's blocked_clients until it is answered, which tests and tools
// poll to know a client waits. Through sluice neither showed it.
func TestPassthroughBlockedClientIsListed(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		k := "{bl" + strconv.Itoa(-loops) + "}"
		node := primaryOf(t, c, k)
		for name, at := range map[string]string{"node": node.Addr, "sluice": addr} {
			waiter, other := dialRaw(t, at), dialRaw(t, at)
			waiter.do("CLIENT", "SETNAME", "waiter")
			listed := func() bool {
				for _, line := range strings.Split(other.do("CLIENT", "LIST"), "\n") {
					if strings.Contains(line, "name=waiter ") {
						return strings.Contains(line, " flags=b ")
					}
				}
				return false
			}
			counted := func() bool { return strings.Contains(other.do("INFO", "clients"), "blocked_clients:1\r\n") }
			waiter.send([]string{"BLPOP", k, "0"})
			waitUntil(t, name+" lists the client blocked", func() bool { return listed() && counted() })
			other.do("RPUSH", k, "a")
			waiter.read()
			if listed() || counted() {
				t.Errorf("loops %d: %s lists the client blocked once answered", loops, name)
			}
		}
	}
}

// TestPassthroughPubSub subscribes through sluice and publishes through
// sluice: messages arrive, in RESP2 and RESP3, and a subscriber that goes
// away leaves no subscription behind on the cluster.
func TestPassthroughPubSub(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		testPubSub(t, c, addr)
		testShardChannels(t, c, addr)
		testPubSubOrder(t, addr)
	})
}

// testPubSubOrder sends subscription commands and others in one pipeline:
// the replies come in the commands' order, as from one node, although the
// subscriptions' confirmations come from the node later than sluice
// answers PING or refuses a command.
func testPubSubOrder(t *testing.T, addr string) {
	bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	conf := func(arr, kind, ch string, n int) string {
		return arr + bulk(kind) + bulk(ch) + ":" + strconv.Itoa(n) + "\r\n"
	}
	expect := func(conn *rawConn, what string, want ...string) {
		t.Helper()
		for i, w := range want {
			if got := conn.read(); got != w && !(strings.HasSuffix(w, "...") && strings.HasPrefix(got, strings.TrimSuffix(w, "..."))) {
				t.Fatalf("%s: reply %d is %q, want %q", what, i, got, w)
			}
		}
	}

	// RESP2: the refusal and the PONG of subscribed mode follow the
	// confirmations, and QUIT's OK comes last.
	sub := dialRaw(t, addr)
	sub.send([]string{"SUBSCRIBE", "po:a", "po:b"}, []string{"GET", "po:k"}, []string{"PING"}, []string{"QUIT"})
	expect(sub, "RESP2 pipeline",
		conf("*3\r\n", "subscribe", "po:a", 1), conf("*3\r\n", "subscribe", "po:b", 2),
		"-ERR Can't execute 'get'...", "*2\r\n$4\r\npong\r\n$0\r\n\r\n", "+OK\r\n")

	// RESP3: a forwarded GET and a local PING follow the confirmation
	// pushed before them, and the unsubscription's.
	sub3 := dialRaw(t, addr)
	sub3.do("HELLO", "3")
	sub3.send([]string{"SUBSCRIBE", "po:c"}, []string{"GET", "po:k"}, []string{"PING"},
		[]string{"UNSUBSCRIBE", "po:c"}, []string{"ECHO", "e"}, []string{"QUIT"})
	expect(sub3, "RESP3 pipeline",
		conf(">3\r\n", "subscribe", "po:c", 1), "_\r\n", "+PONG\r\n",
		conf(">3\r\n", "unsubscribe", "po:c", 0), "$1\r\ne\r\n", "+OK\r\n")
}

// TestPassthroughSubscribedModeInAPipeline: a RESP2 client leaves
// subscribed mode with its last unsubscription, and a RESP3 one that
// switches to RESP2 enters it, at once, as on a node: the commands
// pipelined after are answered as the node answers them, although the
// node's confirmation comes later.
func TestPassthroughSubscribedModeInAPipeline(t *testing.T) {
	pipelinesAsTheNode(t, []nodePipeline{
		{[][]string{{"SUBSCRIBE", "sm:a"}, {"UNSUBSCRIBE", "sm:a"}, {"GET", "sm:k"}, {"PING"}}, 4},
		// UNSUBSCRIBE without channels confirms them in the node's order.
		{[][]string{{"SUBSCRIBE", "sm:a", "sm:b"}, {"PSUBSCRIBE", "sm:*"}, {"UNSUBSCRIBE", "sm:b", "sm:a"}, {"PING", "x"}, {"PUNSUBSCRIBE"}, {"ECHO", "e"}}, 8},
		{[][]string{{"HELLO", "3"}, {"SUBSCRIBE", "sm:a"}, {"HELLO", "2"}, {"GET", "sm:k"}, {"PING", "x"}, {"UNSUBSCRIBE"}, {"GET", "sm:k"}}, 7},
	})
}

// TestPassthroughSubscriptionsUnderClientReply: CLIENT REPLY OFF and SKIP
// drop replies, but not what a node pushes of a client's subscriptions,
// their confirmations included (Redis 7.0.15's CLIENT_PUSHING).
func TestPassthroughSubscriptionsUnderClientReply(t *testing.T) {
	pipelinesAsTheNode(t, []nodePipeline{
		{[][]string{{"CLIENT", "REPLY", "SKIP"}, {"SUBSCRIBE", "sm:a"}, {"PING"}, {"UNSUBSCRIBE"}, {"ECHO", "e"}}, 4},
		{[][]string{{"CLIENT", "REPLY", "OFF"}, {"SUBSCRIBE", "sm:a", "sm:b"}, {"PING", "x"}, {"UNSUBSCRIBE", "sm:a", "sm:b"},
			{"GET", "sm:k"}, {"CLIENT", "REPLY", "ON"}, {"ECHO", "e"}}, 6},
		{[][]string{{"HELLO", "3"}, {"CLIENT", "REPLY", "OFF"}, {"SUBSCRIBE", "sm:a"}, {"PING"}, {"GET", "sm:k"},
			{"UNSUBSCRIBE", "sm:a"}, {"CLIENT", "REPLY", "ON"}, {"ECHO", "e"}}, 5},
	})
}

// nodePipeline is a pipeline, and how many replies a node gives it (a
// subscription command has one per channel).
type nodePipeline struct {
	cmds    [][]string
	replies int
}

// pipelinesAsTheNode sends each pipeline on a new connection through
// sluice, on both serving paths, and to the primary of slot sm:k's: the
// replies must be the node's.
func pipelinesAsTheNode(t *testing.T, pipelines []nodePipeline) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	n := primaryOf(t, c, "sm:k")
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		for _, p := range pipelines {
			through, node := dialRaw(t, addr), dialRaw(t, n.Addr)
			through.send(p.cmds...)
			node.send(p.cmds...)
			for i := range p.replies {
				got, want := through.read(), node.read()
				if strings.Contains(want, "$6\r\nserver\r\n") {
					// HELLO's: its server, version and id are sluice's.
					got, want = got[:4], want[:4]
				}
				if got != want {
					// The replies after would not pair up.
					t.Errorf("%q: reply %d through sluice %q, from the node %q", p.cmds, i, got, want)
					break
				}
			}
		}
	})
}

// testShardChannels subscribes one client to shard channels on two
// primaries: each is served, the counts are the client's on both, and the
// client leaves subscribed mode once it has none left on either.
func testShardChannels(t *testing.T, c *clustertest.Cluster, addr string) {
	var a, b string
	var na *clustertest.Node
	for i := 0; b == ""; i++ {
		ch := "shard:" + t.Name() + strconv.Itoa(i)
		n := primaryOf(t, c, ch)
		if na == nil {
			a, na = ch, n
		} else if n != na {
			b = ch
		}
	}
	bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	conf := func(kind, ch string, n int) string {
		return "*3\r\n" + bulk(kind) + bulk(ch) + ":" + strconv.Itoa(n) + "\r\n"
	}
	sub, pub := dialRaw(t, addr), dialRaw(t, addr)
	// One at a time: each node answers in its own time, so what two of
	// them answer comes in the order it arrives.
	for _, step := range []struct {
		chans []string
		want  string
	}{
		{[]string{a}, conf("ssubscribe", a, 1)},
		{[]string{b}, conf("ssubscribe", b, 2)},
		{[]string{a, b}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
	} {
		if got := sub.do(append([]string{"SSUBSCRIBE"}, step.chans...)...); got != step.want {
			t.Errorf("SSUBSCRIBE %q: %q, want %q", step.chans, got, step.want)
		}
	}
	for _, ch := range []string{a, b} {
		if got := pub.do("SPUBLISH", ch, "x"); got != ":1\r\n" {
			t.Errorf("SPUBLISH %s: %q", ch, got)
		}
		if got, want := sub.read(), "*3\r\n"+bulk("smessage")+bulk(ch)+bulk("x"); got != want {
			t.Errorf("smessage: %q, want %q", got, want)
		}
	}
	if got := sub.do("GET", "k"); !strings.HasPrefix(got, "-ERR Can't execute 'get'") {
		t.Errorf("GET while subscribed to shard channels: %q", got)
	}
	if got := sub.do("PING"); got != "*2\r\n$4\r\npong\r\n$0\r\n\r\n" {
		t.Errorf("PING while subscribed to shard channels: %q", got)
	}
	sub.send([]string{"SUNSUBSCRIBE"})
	for _, n := range []string{":1\r\n", ":0\r\n"} {
		if got := sub.read(); !strings.HasPrefix(got, "*3\r\n$12\r\nsunsubscribe\r\n") || !strings.HasSuffix(got, n) {
			t.Errorf("SUNSUBSCRIBE: %q, want a confirmation ending %q", got, n)
		}
	}
	pub.do("SET", "shard:k", "v")
	if got := sub.do("GET", "shard:k"); got != "$1\r\nv\r\n" {
		t.Errorf("GET after SUNSUBSCRIBE: %q", got)
	}
}

func testPubSub(t *testing.T, c *clustertest.Cluster, addr string) {
	pub := dialRaw(t, addr)
	b := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	msg := func(kind, channel, payload string) string {
		return "*3\r\n" + b(kind) + b(channel) + b(payload)
	}
	// Channels and patterns of this subtest's own: a node delivers what
	// another published on the cluster bus when that reaches it, which can
	// be after the subtest before this one got its reply and a subscriber
	// of the same name subscribed here.
	ch1, ch2, ch3, pat, px, shard := t.Name()+":ch1", t.Name()+":ch2", t.Name()+":ch3", t.Name()+":p*", t.Name()+":px", t.Name()+"{s}ch"

	// RESP2: subscribed mode.
	sub := dialRaw(t, addr)
	sub.send([]string{"SUBSCRIBE", ch1, ch2})
	for i, ch := range []string{ch1, ch2} {
		want := "*3\r\n$9\r\nsubscribe\r\n" + b(ch) + ":" + strconv.Itoa(i+1) + "\r\n"
		if got := sub.read(); got != want {
			t.Fatalf("SUBSCRIBE confirmation %d: %q, want %q", i, got, want)
		}
	}
	pub.do("PUBLISH", ch1, "hello")
	if got, want := sub.read(), msg("message", ch1, "hello"); got != want {
		t.Errorf("message: %q, want %q", got, want)
	}
	if got := sub.do("GET", "k"); !strings.HasPrefix(got, "-ERR Can't execute 'get'") {
		t.Errorf("GET while subscribed (RESP2): %q, want Redis's refusal", got)
	}
	if got := sub.do("PING"); got != "*2\r\n$4\r\npong\r\n$0\r\n\r\n" {
		t.Errorf("PING while subscribed: %q", got)
	}
	sub.send([]string{"PSUBSCRIBE", pat})
	sub.read()
	pub.do("PUBLISH", px, "m")
	if got, want := sub.read(), "*4\r\n$8\r\npmessage\r\n"+b(pat)+b(px)+"$1\r\nm\r\n"; got != want {
		t.Errorf("pmessage: %q, want %q", got, want)
	}
	// PUBSUB counts the subscribers of every primary.
	if got := pub.do("PUBSUB", "NUMSUB", ch1, "none"); got != "*4\r\n"+b(ch1)+":1\r\n$4\r\nnone\r\n:0\r\n" {
		t.Errorf("PUBSUB NUMSUB: %q", got)
	}
	if got := pub.do("PUBSUB", "NUMPAT"); got != ":1\r\n" {
		t.Errorf("PUBSUB NUMPAT: %q", got)
	}
	if got := pub.do("PUBSUB", "CHANNELS", t.Name()+":ch*"); got != "*2\r\n"+b(ch1)+b(ch2) && got != "*2\r\n"+b(ch2)+b(ch1) {
		t.Errorf("PUBSUB CHANNELS: %q", got)
	}
	sub.send([]string{"UNSUBSCRIBE"}, []string{"PUNSUBSCRIBE"})
	var confirmations []string
	for range 3 {
		confirmations = append(confirmations, sub.read())
	}
	// Two channels' confirmations, then the pattern's, counting down.
	if !strings.HasPrefix(confirmations[0], "*3\r\n$11\r\nunsubscribe\r\n") || !strings.HasPrefix(confirmations[1], "*3\r\n$11\r\nunsubscribe\r\n") ||
		confirmations[2] != "*3\r\n$12\r\npunsubscribe\r\n"+b(pat)+":0\r\n" {
		t.Errorf("UNSUBSCRIBE, PUNSUBSCRIBE: %q, want two unsubscribe confirmations and punsubscribe %s 0", confirmations, pat)
	}
	// Out of subscribed mode, its commands are routed again.
	pub.do("SET", "ps:k", "v")
	if got := sub.do("GET", "ps:k"); got != "$1\r\nv\r\n" {
		t.Errorf("GET after the last unsubscription: %q", got)
	}

	// Shard channels go to their slot's primary.
	ssub := dialRaw(t, addr)
	ssub.send([]string{"SSUBSCRIBE", shard})
	ssub.read()
	pub.do("SPUBLISH", shard, "x")
	if got, want := ssub.read(), msg("smessage", shard, "x"); got != want {
		t.Errorf("smessage: %q, want %q", got, want)
	}
	// RESET ends subscribed mode and the subscriptions.
	if got := ssub.do("RESET"); got != "+RESET\r\n" {
		t.Errorf("RESET while subscribed: %q", got)
	}
	if got := ssub.do("GET", "ps:k"); got != "$1\r\nv\r\n" {
		t.Errorf("GET after RESET: %q", got)
	}

	// RESP3: pushes, and ordinary commands go on meanwhile.
	sub3 := dialRaw(t, addr)
	sub3.do("HELLO", "3")
	sub3.send([]string{"SUBSCRIBE", ch3})
	if got := sub3.read(); got != ">3\r\n$9\r\nsubscribe\r\n"+b(ch3)+":1\r\n" {
		t.Errorf("RESP3 SUBSCRIBE: %q", got)
	}
	if got := sub3.do("GET", "ps:k"); got != "$1\r\nv\r\n" {
		t.Errorf("RESP3 GET while subscribed: %q", got)
	}
	pub.do("PUBLISH", ch3, "hi")
	if got := sub3.read(); got != ">3\r\n$7\r\nmessage\r\n"+b(ch3)+"$2\r\nhi\r\n" {
		t.Errorf("RESP3 message: %q", got)
	}

	// Subscribers that go away leave no subscription on any primary.
	sub3.c.Close()
	ssub.c.Close()
	numsub := func() string {
		var all []string
		for _, n := range c.Nodes {
			v, err := n.Do(context.Background(), "PUBSUB", "NUMSUB", ch3).ToArray()
			if err != nil || len(v) != 2 {
				t.Fatalf("PUBSUB NUMSUB on %s: %v", n.Addr, err)
			}
			cnt, _ := v[1].AsInt64()
			shard, err := n.Do(context.Background(), "PUBSUB", "SHARDNUMSUB", shard).ToArray()
			if err != nil || len(shard) != 2 {
				t.Fatalf("PUBSUB SHARDNUMSUB on %s: %v", n.Addr, err)
			}
			scnt, _ := shard[1].AsInt64()
			if cnt+scnt > 0 {
				all = append(all, n.Addr)
			}
		}
		return strings.Join(all, ",")
	}
	waitUntil(t, "no primary keeps a subscription of the clients that left", func() bool { return numsub() == "" })
}

// TestPassthroughCommandTable: COMMAND answers the cluster's table with
// sluice's own commands added, as cluster clients look commands up in it.
func TestPassthroughCommandTable(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, resp3 := range []bool{false, true} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
		if resp3 {
			conn.do("HELLO", "3")
		}
		count := func(reply string) int {
			n, err := strconv.Atoi(strings.TrimSuffix(reply[1:], "\r\n"))
			if err != nil {
				t.Fatalf("COMMAND COUNT: %q", reply)
			}
			return n
		}
		direct := count(directIn(t, c, resp3, 0, "COMMAND", "COUNT"))
		through := count(conn.do("COMMAND", "COUNT"))
		if through != direct+4 {
			t.Errorf("COMMAND COUNT through sluice %d, want the cluster's %d and sluice's 4", through, direct)
		}
		if all := conn.do("COMMAND"); !strings.HasPrefix(all, "*"+strconv.Itoa(through)+"\r\n") || !strings.Contains(all, "\r\n$4\r\ngcra\r\n") {
			t.Errorf("COMMAND: %d entries, want %d with gcra (%q...)", len(all), through, all[:20])
		}
		get := directIn(t, c, resp3, 0, "COMMAND", "INFO", "get")
		set := directIn(t, c, resp3, 0, "COMMAND", "INFO", "set")
		got := conn.do("COMMAND", "INFO", "get", "THROTTLE", "set")
		want := "*3\r\n" + strings.TrimPrefix(get, "*1\r\n")
		if !strings.HasPrefix(got, want+"*10\r\n$8\r\nthrottle\r\n") || !strings.HasSuffix(got, strings.TrimPrefix(set, "*1\r\n")) {
			t.Errorf("RESP3 %v: COMMAND INFO get THROTTLE set: %q", resp3, got)
		}
		// Only sluice's own names: the cluster, asked COMMAND INFO of no
		// name, would list every command of its own.
		if got := conn.do("COMMAND", "INFO", "throttle"); !strings.HasPrefix(got, "*1\r\n*10\r\n$8\r\nthrottle\r\n") {
			t.Errorf("RESP3 %v: COMMAND INFO throttle: %.200q", resp3, got)
		}
		// COMMAND DOCS has sluice's own commands' docs, as without a
		// cluster, beside the cluster's.
		mapOf := func(n int) string {
			if resp3 {
				return "%" + strconv.Itoa(n) + "\r\n"
			}
			return "*" + strconv.Itoa(2*n) + "\r\n"
		}
		throttleDocs := "$8\r\nthrottle\r\n" + mapOf(5) + "$7\r\nsummary\r\n"
		if got := conn.do("COMMAND", "DOCS", "THROTTLE"); !strings.HasPrefix(got, mapOf(1)+throttleDocs) {
			t.Errorf("RESP3 %v: COMMAND DOCS THROTTLE: %.200q", resp3, got)
		}
		if got := conn.do("COMMAND", "DOCS", "get", "throttle"); !strings.HasPrefix(got, mapOf(2)+"$3\r\nget\r\n") || !strings.Contains(got, throttleDocs) {
			t.Errorf("RESP3 %v: COMMAND DOCS get throttle: %.200q", resp3, got)
		}
		if got := conn.do("COMMAND", "DOCS"); !strings.Contains(got, throttleDocs) || !strings.Contains(got, "$3\r\nget\r\n") {
			t.Errorf("RESP3 %v: COMMAND DOCS lacks throttle or get (%d bytes)", resp3, len(got))
		}
		// COMMAND GETKEYS: sluice finds its commands' keys, the cluster
		// those of its own.
		if got := conn.do("COMMAND", "GETKEYS", "GCRA", "k", "1", "1", "1"); got != "*1\r\n$1\r\nk\r\n" {
			t.Errorf("RESP3 %v: COMMAND GETKEYS GCRA k 1 1 1: %q", resp3, got)
		}
		if got := conn.do("COMMAND", "GETKEYS", "SET", "a", "b"); got != "*1\r\n$1\r\na\r\n" {
			t.Errorf("RESP3 %v: COMMAND GETKEYS SET a b: %q", resp3, got)
		}
		// COMMAND LIST FILTERBY lists sluice's commands as COMMAND LIST
		// does, where they match; a pattern ignores case, as Redis's.
		for _, tc := range []struct{ filter, want string }{
			{"PATTERN THR*", "*2\r\n$8\r\nthrottle\r\n$14\r\nthrottle.reset\r\n"},
			{"PATTERN gcr?", "*1\r\n$4\r\ngcra\r\n"},
			{"PATTERN nosuch*", "*0\r\n"},
			{"ACLCAT RATE_LIMIT", "*3\r\n$11\r\ncl.throttle\r\n$4\r\ngcra\r\n$8\r\nthrottle\r\n"},
			{"MODULE nosuch", "*0\r\n"},
		} {
			args := append([]string{"COMMAND", "LIST", "FILTERBY"}, strings.Fields(tc.filter)...)
			if got := conn.do(args...); got != tc.want {
				t.Errorf("RESP3 %v: COMMAND LIST FILTERBY %s: %q, want %q", resp3, tc.filter, got, tc.want)
			}
		}
		if got, want := conn.do("COMMAND", "LIST", "FILTERBY", "NOSUCH", "x"), directIn(t, c, resp3, 0, "COMMAND", "LIST", "FILTERBY", "NOSUCH", "x"); got != want {
			t.Errorf("RESP3 %v: COMMAND LIST FILTERBY NOSUCH x: %q, the cluster %q", resp3, got, want)
		}
	}
	// CLIENT LIST names a forwarded subcommand as Redis does.
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r})
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	b.do("CLIENT", "SETNAME", "b")
	b.do("CONFIG", "GET", "maxmemory")
	if got := a.do("CLIENT", "LIST"); !strings.Contains(got, " name=b ") || !strings.Contains(got, " cmd=config|get ") {
		t.Errorf("CLIENT LIST after CONFIG GET: %q, want cmd=config|get", got)
	}
	// An unknown command is named NULL, as Redis names it.
	b.do("NOSUCHCOMMAND", "x")
	if got := a.do("CLIENT", "LIST"); !strings.Contains(got, " name=b ") || !strings.Contains(got, " cmd=NULL ") {
		t.Errorf("CLIENT LIST after an unknown command: %q, want cmd=NULL", got)
	}
	// COMMAND answers in the protocol it was sent in, a HELLO 3 pipelined
	// behind it, which sluice takes before the cluster answers, included.
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	conn.send([]string{"COMMAND"}, []string{"HELLO", "3"})
	if got := conn.read(); !strings.Contains(got, "\r\n*10\r\n$8\r\nthrottle\r\n:-2\r\n*2\r\n+write\r\n") {
		t.Errorf("COMMAND, then HELLO 3: sluice's entries not in RESP2 (%d bytes)", len(got))
	}
	conn.read()
	if got := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r})).do("INFO", "cluster"); !strings.Contains(got, "cluster_enabled:1\r\n") {
		t.Errorf("INFO cluster: %q", got)
	}
}

// TestPassthroughWatch: WATCH through sluice watches on the key's node,
// on a connection of the client's own until EXEC, DISCARD or UNWATCH.
func TestPassthroughWatch(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		a, b := dialRaw(t, addr), dialRaw(t, addr)
		k := "{w" + strconv.Itoa(-loops) + "}k"
		b.do("SET", k, "0")
		for _, step := range []struct {
			conn *rawConn
			cmd  []string
			want string
		}{
			// Another client writes the watched key: EXEC does nothing.
			{a, []string{"WATCH", k}, "+OK\r\n"},
			{a, []string{"GET", k}, "$1\r\n0\r\n"},
			{b, []string{"SET", k, "1"}, "+OK\r\n"},
			{a, []string{"MULTI"}, "+OK\r\n"},
			{a, []string{"SET", k, "a"}, "+QUEUED\r\n"},
			{a, []string{"EXEC"}, "*-1\r\n"},
			{a, []string{"GET", k}, "$1\r\n1\r\n"},
			// Nobody writes it: EXEC runs.
			{a, []string{"WATCH", k}, "+OK\r\n"},
			{a, []string{"MULTI"}, "+OK\r\n"},
			{a, []string{"SET", k, "a"}, "+QUEUED\r\n"},
			{a, []string{"EXEC"}, "*1\r\n+OK\r\n"},
			// UNWATCH and DISCARD end the watch.
			{a, []string{"WATCH", k}, "+OK\r\n"},
			{b, []string{"SET", k, "2"}, "+OK\r\n"},
			{a, []string{"UNWATCH"}, "+OK\r\n"},
			{a, []string{"MULTI"}, "+OK\r\n"},
			{a, []string{"SET", k, "b"}, "+QUEUED\r\n"},
			{a, []string{"EXEC"}, "*1\r\n+OK\r\n"},
			{a, []string{"WATCH", k}, "+OK\r\n"},
			{b, []string{"SET", k, "3"}, "+OK\r\n"},
			{a, []string{"MULTI"}, "+OK\r\n"},
			{a, []string{"DISCARD"}, "+OK\r\n"},
			{a, []string{"MULTI"}, "+OK\r\n"},
			{a, []string{"SET", k, "c"}, "+QUEUED\r\n"},
			{a, []string{"EXEC"}, "*1\r\n+OK\r\n"},
			{a, []string{"WATCH", k, "{other}k"}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
			{a, []string{"UNWATCH"}, "+OK\r\n"},
		} {
			if got := step.conn.do(step.cmd...); got != step.want {
				t.Errorf("loops %d, %q: got %q, want %q", loops, step.cmd, got, step.want)
			}
		}
		// A transaction without keys runs where the watches are, not on
		// any primary: a changed watched key aborts it. (Any primary is
		// one chosen by the clock: try a few times.)
		for i := range 6 {
			for _, queued := range [][]string{nil, {"PING"}} {
				a.do("WATCH", k)
				b.do("SET", k, "x")
				a.do("MULTI")
				if queued != nil {
					a.do(queued...)
				}
				if got := a.do("EXEC"); got != "*-1\r\n" {
					t.Errorf("loops %d, try %d: EXEC of MULTI %q after a watched key changed: %q, want a null array", loops, i, queued, got)
				}
			}
		}
	}
	// Every pinned connection is closed once its transaction ended. (A
	// shared connection's last command may be an EXEC too, so only the
	// pins whose last command was WATCH or UNWATCH can be told apart.)
	node := primaryOf(t, c, "{w0}k")
	watching := func() int {
		list, err := node.Do(context.Background(), "CLIENT", "LIST").ToString()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(list, "cmd=watch") + strings.Count(list, "cmd=unwatch")
	}
	waitUntil(t, "every pinned connection is closed once its transaction ended", func() bool { return watching() == 0 })
}

// TestPassthroughAfterTheWatch pipelines commands after the one that ends
// a watch (EXEC, UNWATCH, DISCARD): they must run after the commands sent on the
// watching connection, as one Redis connection runs its pipeline, and so
// read what those wrote.
func TestPassthroughAfterTheWatch(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		for i := range 5 {
			k := "{aw}k" + strconv.Itoa(-loops) + strconv.Itoa(i)
			conn.do("SET", k, "old")
			for _, tc := range []struct {
				cmds [][]string
				want []string
			}{
				{[][]string{{"WATCH", k}, {"MULTI"}, {"SET", k, "exec"}, {"EXEC"}, {"GET", k}},
					[]string{"+OK\r\n", "+OK\r\n", "+QUEUED\r\n", "*1\r\n+OK\r\n", "$4\r\nexec\r\n"}},
				{[][]string{{"WATCH", k}, {"SET", k, "unwatch"}, {"UNWATCH"}, {"GET", k}},
					[]string{"+OK\r\n", "+OK\r\n", "+OK\r\n", "$7\r\nunwatch\r\n"}},
				// Ended by sluice itself: DISCARD, and EXEC of a transaction
				// refused (EXECABORT, CROSSSLOT).
				{[][]string{{"WATCH", k}, {"SET", k, "discard"}, {"MULTI"}, {"DISCARD"}, {"GET", k}},
					[]string{"+OK\r\n", "+OK\r\n", "+OK\r\n", "+OK\r\n", "$7\r\ndiscard\r\n"}},
				{[][]string{{"WATCH", k}, {"SET", k, "abort"}, {"MULTI"}, {"GET"}, {"EXEC"}, {"GET", k}},
					[]string{"+OK\r\n", "+OK\r\n", "+OK\r\n", "-ERR wrong number of arguments for 'get' command\r\n",
						"-EXECABORT Transaction discarded because of previous errors.\r\n", "$5\r\nabort\r\n"}},
				// RESET ends the watch too.
				{[][]string{{"WATCH", k}, {"SET", k, "reset"}, {"RESET"}, {"GET", k}},
					[]string{"+OK\r\n", "+OK\r\n", "+RESET\r\n", "$5\r\nreset\r\n"}},
				{[][]string{{"WATCH", k}, {"SET", k, "cross"}, {"MULTI"}, {"SET", k, "x"}, {"SET", "{aw:other}", "y"}, {"EXEC"}, {"GET", k}},
					[]string{"+OK\r\n", "+OK\r\n", "+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n",
						"-CROSSSLOT Keys in request don't hash to the same slot\r\n", "$5\r\ncross\r\n"}},
			} {
				conn.send(tc.cmds...)
				for j, want := range tc.want {
					if got := conn.read(); got != want {
						t.Errorf("loops %d: %q: %q answered %q, want %q", loops, tc.cmds, tc.cmds[j], got, want)
					}
				}
			}
		}
	}
}

// A subscriber that does not read its messages is closed once 32 MiB of
// them wait in sluice, as Redis closes one past its output buffer limit,
// instead of growing sluice's memory without bound.
func TestPassthroughSubscriberThatDoesNotRead(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		testSubscriberThatDoesNotRead(t, c, serveConfig(t, cfg))
	})
}

func testSubscriberThatDoesNotRead(t *testing.T, c *clustertest.Cluster, addr string) {
	sub, pub := dialRaw(t, addr), dialRaw(t, addr)
	sub.send([]string{"SUBSCRIBE", "flood"})
	if got := sub.read(); !strings.HasPrefix(got, "*3\r\n$9\r\nsubscribe\r\n") {
		t.Fatalf("SUBSCRIBE: %q", got)
	}
	// Published straight to the channel's node, which sluice's
	// subscription is on: through sluice, forwarding the PUBLISHes took
	// most of the test's time. Each waits until the node has passed the
	// last one on to sluice, so that the node never holds enough for its
	// own pubsub output limit to close sluice's subscription.
	node := dialRaw(t, primaryOf(t, c, "flood").Addr)
	omem := regexp.MustCompile(` omem=(\d+) `)
	passedOn := func() bool {
		for _, m := range omem.FindAllStringSubmatch(node.do("CLIENT", "LIST", "TYPE", "pubsub"), -1) {
			if m[1] != "0" {
				return false
			}
		}
		return true
	}
	payload := strings.Repeat("x", 1<<20)
	unsubscribed := func() bool { return pub.do("PUBSUB", "NUMSUB", "flood") == "*2\r\n$5\r\nflood\r\n:0\r\n" }
	for i := 0; !unsubscribed(); i++ {
		// 64 MiB at most: the socket buffers and sluice's 32 MiB fill first.
		// What was published reaches sluice, and the subscription's end
		// the node, a while after PUBLISH is answered (longer on a loaded
		// machine): past 64 MiB, wait for them, publishing no more.
		if i == 64 {
			waitUntil(t, "a subscriber that reads nothing unsubscribed after 64 MiB of messages", unsubscribed)
			break
		}
		waitUntil(t, "the node passes the messages on to sluice", passedOn)
		node.do("PUBLISH", "flood", payload)
	}
}

// A hung node (SIGSTOP) delays only its own keys: the commands for the
// other primaries, from another client, are answered while the hung
// node's still waits, and the hung node's is answered an error naming it
// once the forward timeout has passed. A node that restarts is dialled
// again. Both serving paths: the event loops forward on connections of
// their own.
func TestPassthroughHungAndRestartedNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	const timeout = time.Second
	r := router.NewCluster(router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1, ForwardTimeout: timeout})
	t.Cleanup(r.Close)
	waitRouter(t, r)
	ctx := context.Background()
	byNode := map[*clustertest.Node]string{}
	for i := 0; len(byNode) < 3 && i < 1000; i++ {
		k := "hung:" + strconv.Itoa(i)
		n := primaryOf(t, c, k)
		if _, ok := byNode[n]; !ok {
			byNode[n] = k
			if got := direct(t, c, slot.Of(k), "SET", k, k); got != "+OK\r\n" {
				t.Fatalf("SET %s: %q", k, got)
			}
		}
	}
	var hung *clustertest.Node
	var others []string
	for n, k := range byNode {
		if hung == nil {
			hung = n
		} else {
			others = append(others, k)
		}
	}
	if len(others) != 2 {
		t.Fatalf("keys on %d primaries, want 3", len(byNode))
	}
	bulk := func(k string) string { return "$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n" }
	for _, loops := range []int{1, -1} {
		// One server: with one event loop, the hung node's command and
		// the healthy ones are on the same loop, which must not wait.
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		conn := dialRaw(t, addr)
		if got := conn.do("GET", byNode[hung]); got != bulk(byNode[hung]) {
			t.Fatalf("loops %d: GET before the pause: %q", loops, got)
		}
		if err := hung.Pause(); err != nil {
			t.Fatal(err)
		}
		other := dialRaw(t, addr)
		start := time.Now()
		conn.send([]string{"GET", byNode[hung]})
		for _, k := range others {
			if got := other.do("GET", k); got != bulk(k) {
				t.Errorf("loops %d: GET %s on a healthy node while another hangs: %q", loops, k, got)
			}
		}
		// The order of the replies, not a bound on the healthy keys' time,
		// which a loaded machine could pass: had they waited behind the
		// hung node, its reply (an error, at the timeout) would be in
		// first. The timeout only leaves them a second to overtake it.
		conn.c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if b, err := conn.br.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("loops %d: the hung node's GET was answered (%q, %v, after %v) before the healthy nodes' keys: they waited behind it", loops, b, err, time.Since(start))
		}
		conn.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got := conn.read()
		took := time.Since(start)
		// In the same words on both paths (not a read's error, with a
		// local port that changes each time).
		if want := "-ERR sluice: connection to " + hung.Addr + " failed: no reply within the timeout\r\n"; got != want {
			t.Errorf("loops %d: GET on the hung node: %q, want %q", loops, got, want)
		}
		if took < timeout || took > timeout+2500*time.Millisecond {
			t.Errorf("loops %d: GET on the hung node answered after %v, want the %v timeout (checked each second)", loops, took, timeout)
		}
		if err := hung.Resume(); err != nil {
			t.Fatal(err)
		}
		if got := conn.do("GET", byNode[hung]); got != bulk(byNode[hung]) {
			t.Errorf("loops %d: GET once the node is back: %q", loops, got)
		}
	}
	// A restarted node closed sluice's connections: the first command may
	// meet the lost one (an error), and the next is sent on a new one.
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: 1}))
	if got := conn.do("SET", byNode[hung], "again"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	if err := hung.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the restarted node answers through sluice", func() bool {
		got := conn.do("GET", byNode[hung])
		if got[0] != '$' && !strings.HasPrefix(got, "-ERR sluice: connection to ") && !strings.HasPrefix(got, "-CLUSTERDOWN") {
			t.Fatalf("GET after the restart: %q", got)
		}
		return got[0] == '$'
	})
}

// A script that fails to compile is not loaded, on any primary: an
// EVALSHA of it is NOSCRIPT through sluice too, not sluice's replay of
// its text as EVAL, which would answer the compile error instead.
func TestPassthroughEvalshaOfAScriptThatDidNotLoad(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	body := "return ("
	if got, want := conn.do("SCRIPT", "LOAD", body), direct(t, c, -1, "SCRIPT", "LOAD", body); got != want {
		t.Fatalf("SCRIPT LOAD of a script that does not compile: %q, want the node's %q", got, want)
	}
	sum := sha1.Sum([]byte(body))
	sha := hex.EncodeToString(sum[:])
	want := direct(t, c, -1, "EVALSHA", sha, "0")
	if !strings.HasPrefix(want, "-NOSCRIPT") {
		t.Fatalf("the node answers EVALSHA of a script it could not load %q, want NOSCRIPT", want)
	}
	if got := conn.do("EVALSHA", sha, "0"); got != want {
		t.Errorf("EVALSHA of a script that did not load: %q, want the node's %q", got, want)
	}
}

// A SCAN cursor is read as a node reads it, with C's strtoul: a sign
// before the digits, and a NUL that ends the text, make no invalid cursor
// where the node takes them.
func TestPassthroughScanCursorText(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	// Pages that depend on the cursor alone: no key matches, and each
	// primary's page is its whole scan.
	page := func(cursor string) string { return conn.do("SCAN", cursor, "MATCH", "no such key", "COUNT", "1000") }
	for _, tc := range []struct{ text, same string }{
		{"+0", "0"}, {"-0", "0"}, {"+1", "1"}, {"0\x00x", "0"}, {"1\x00 ", "1"},
		// No digits after the sign, two signs, a base, a space: invalid.
		{"+", ""}, {"-", ""}, {"+-0", ""}, {"0x1", ""}, {"+ 1", ""},
	} {
		want := "-ERR invalid cursor\r\n"
		if tc.same != "" {
			want = page(tc.same)
		}
		node := direct(t, c, -1, "SCAN", tc.text, "MATCH", "no such key", "COUNT", "1000")
		if (node == "-ERR invalid cursor\r\n") != (tc.same == "") {
			t.Fatalf("SCAN %q on a node: %q: the test has it wrong", tc.text, node)
		}
		if got := page(tc.text); got != want {
			t.Errorf("SCAN %q: %q, want %q, as SCAN %q", tc.text, got, want, tc.same)
		}
	}
}

// A script run by EVAL is cached by the node, as one loaded by SCRIPT
// LOAD: an EVALSHA of it runs on a single Redis. Through sluice its keys
// may be another primary's, which has not seen it.
func TestPassthroughEvalshaOfAScriptRunByEval(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	keyOf := map[string]string{} // a key of each primary, by address
	for i := 0; len(keyOf) < 2; i++ {
		k := "evs:" + strconv.Itoa(i)
		n := primaryOf(t, c, k)
		if _, ok := keyOf[n.Addr]; !ok {
			keyOf[n.Addr] = k
		}
	}
	var keys []string
	for _, k := range keyOf {
		keys = append(keys, k)
	}
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		for _, eval := range []string{"EVAL", "EVAL_RO"} {
			tag := eval + strconv.Itoa(loops) // a script of its own for each
			body := "return KEYS[1] .. '" + tag + "'"
			sum := sha1.Sum([]byte(body))
			sha := hex.EncodeToString(sum[:])
			if got := conn.do(eval, body, "1", keys[0]); !strings.HasPrefix(got, "$") {
				t.Fatalf("%s on %s: %q", eval, keys[0], got)
			}
			want := "$" + strconv.Itoa(len(keys[1]+tag)) + "\r\n" + keys[1] + tag + "\r\n"
			if got := conn.do("EVALSHA", sha, "1", keys[1]); got != want {
				t.Errorf("loops %d: EVALSHA on %s of a script run by %s on %s: %q, want %q", loops, keys[1], eval, keys[0], got, want)
			}
		}
	}
}

// SCRIPT FLUSH through sluice flushes its memory of scripts too: an
// EVALSHA after it answers NOSCRIPT, as Redis's, not sluice's replay as
// EVAL, kept for a node that lost its scripts behind sluice's back.
func TestPassthroughScriptFlushForgetsScripts(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	admin := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, AllowAdmin: true}))
	for _, how := range []string{"alone", "pipelined"} {
		loaded := "return '" + how + "'"
		ran := "return '" + how + " by EVAL'"
		if got := admin.do("SCRIPT", "LOAD", loaded); !strings.HasPrefix(got, "$40\r\n") {
			t.Fatalf("SCRIPT LOAD: %q", got)
		}
		if got := admin.do("EVAL", ran, "0"); !strings.HasPrefix(got, "$") {
			t.Fatalf("EVAL: %q", got)
		}
		var evalshas [][]string
		for _, body := range []string{loaded, ran} {
			sum := sha1.Sum([]byte(body))
			evalshas = append(evalshas, []string{"EVALSHA", hex.EncodeToString(sum[:]), "0"})
		}
		if how == "alone" {
			if got := admin.do("SCRIPT", "FLUSH"); got != "+OK\r\n" {
				t.Fatalf("SCRIPT FLUSH: %q", got)
			}
		} else {
			admin.send(append([][]string{{"SCRIPT", "FLUSH"}}, evalshas...)...)
			if got := admin.read(); got != "+OK\r\n" {
				t.Fatalf("SCRIPT FLUSH: %q", got)
			}
			for _, cmd := range evalshas {
				if got := admin.read(); !strings.HasPrefix(got, "-NOSCRIPT") {
					t.Errorf("%s: %q after SCRIPT FLUSH in its pipeline, want NOSCRIPT", cmd[1], got)
				}
			}
		}
		for _, cmd := range evalshas {
			want := direct(t, c, -1, cmd...)
			if !strings.HasPrefix(want, "-NOSCRIPT") {
				t.Fatalf("a node answers %q after SCRIPT FLUSH: %q", cmd, want)
			}
			if got := admin.do(cmd...); got != want {
				t.Errorf("%s %s after SCRIPT FLUSH: %q, want the node's %q", how, cmd[1], got, want)
			}
		}
	}
}

// A SCAN goes on across a failover: the primary it was scanning goes on
// from its cursor, and every key is seen. The promoted replica takes its
// primary's place in the scan, as it takes its slots; the others keep
// theirs (they were numbered by address, which moved them).
func TestPassthroughScanAcrossAFailover(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	r := newForwarding(t, c)
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	ctx := context.Background()
	const n = 300
	for i := range n {
		if got := conn.do("SET", "sf:"+strconv.Itoa(i), "v"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
	}
	primaryOf := func(k string) string {
		p := primaryOf(t, c, k)
		return p.Addr
	}
	replicaOf := map[string]string{} // by primary address
	for _, node := range c.Nodes[3:] {
		role, err := node.Do(ctx, "ROLE").ToArray()
		if err != nil || len(role) < 3 {
			t.Fatalf("ROLE of %s: %v", node.Addr, err)
		}
		host, _ := role[1].ToString()
		port, _ := role[2].AsInt64()
		replicaOf[net.JoinHostPort(host, strconv.FormatInt(port, 10))] = node.Addr
	}
	seen := map[string]bool{}
	scan := func(cursor string) (next string, from string) {
		got := conn.do("SCAN", cursor, "MATCH", "sf:*", "COUNT", "10")
		lines := strings.Split(got, "\r\n")
		if len(lines) < 4 || lines[0] != "*2" {
			t.Fatalf("SCAN %s: %q", cursor, got)
		}
		for i := 5; i < len(lines); i += 2 {
			seen[lines[i]] = true
			from = primaryOf(lines[i])
		}
		return lines[2], from
	}
	// Scan into a primary, and stop within it, once another primary's
	// replica is on its other side by address: numbered by address, the
	// scanned primary's number would change when that replica is promoted.
	cursor, failed := "0", ""
	for failed == "" {
		next, from := scan(cursor)
		cur, _ := strconv.ParseUint(next, 10, 64)
		cursor = next
		if from != "" && cur>>8 != 0 {
			for p, rep := range replicaOf {
				if p != from && (p < from) != (rep < from) {
					failed = p
				}
			}
		}
		if cursor == "0" {
			t.Skipf("no primary's replica is on the other side of another primary by address: %v", replicaOf)
		}
	}
	promoted := replicaOf[failed]
	for _, node := range c.Nodes {
		if node.Addr == promoted {
			if err := node.Do(ctx, "CLUSTER", "FAILOVER").Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitUntil(t, "sluice's slot map has the promoted replica", func() bool {
		has := false
		for _, s := range r.Stats().Cluster.Shards {
			has = has || s.Addr == promoted
		}
		return has
	})
	for pages := 0; cursor != "0"; pages++ {
		if pages > 1000 {
			t.Fatal("the scan does not end")
		}
		cursor, _ = scan(cursor)
	}
	if len(seen) != n {
		t.Errorf("SCAN across a failover saw %d keys of %d", len(seen), n)
	}
}

// Instances behind one load balancer share the scripts loaded through
// any of them: an EVALSHA through another instance than the one that saw
// the script loaded, or run by EVAL, meeting a node that lost it (a
// promoted replica, a restart), is replayed all the same. A SCRIPT FLUSH
// through one instance is the others' too: an EVALSHA through another
// answers NOSCRIPT, as through the one that flushed.
func TestPassthroughScriptsSharedByInstances(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ra, rb := newForwarding(t, c), newForwarding(t, c)
	a := dialRaw(t, serveConfig(t, proxy.Config{Decider: ra, Forwarder: ra, AllowAdmin: true}))
	b := dialRaw(t, serveConfig(t, proxy.Config{Decider: rb, Forwarder: rb, AllowAdmin: true}))
	keyOf := map[string]string{} // a key of each primary, by address
	for i := 0; len(keyOf) < len(c.Nodes); i++ {
		k := "shs:" + strconv.Itoa(i)
		keyOf[primaryOf(t, c, k).Addr] = k
	}
	loaded := "return 'loaded ' .. KEYS[1]"
	ran := "return 'ran ' .. KEYS[1]"
	if got := a.do("SCRIPT", "LOAD", loaded); !strings.HasPrefix(got, "$40\r\n") {
		t.Fatalf("SCRIPT LOAD through A: %q", got)
	}
	if got := a.do("EVAL", ran, "1", "shs:x"); !strings.HasPrefix(got, "$") {
		t.Fatalf("EVAL through A: %q", got)
	}
	loseScripts := func() {
		for _, n := range c.Nodes {
			if err := n.Do(context.Background(), "SCRIPT", "FLUSH").Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A stores what it saw in the hash on a connection of its own, once
	// the load and the EVAL are answered.
	store := primaryOf(t, c, "sluice.scripts")
	waitUntil(t, "A stores both scripts in sluice.scripts", func() bool {
		n, err := store.Do(context.Background(), "HLEN", "sluice.scripts").AsInt64()
		return err == nil && n == 2
	})
	loseScripts()
	for _, body := range []string{loaded, ran} {
		sum := sha1.Sum([]byte(body))
		sha := hex.EncodeToString(sum[:])
		for _, k := range keyOf {
			want := strings.Replace(body, "return '", "", 1)
			want = strings.Replace(want, "' .. KEYS[1]", "", 1) + k
			want = "$" + strconv.Itoa(len(want)) + "\r\n" + want + "\r\n"
			if got := b.do("EVALSHA", sha, "1", k); got != want {
				t.Errorf("EVALSHA through B on %s of %q, seen by A only, after the nodes lost it: %q, want %q", k, body, got, want)
			}
		}
	}
	// B has now replayed both: a flush through A must reach what B knows.
	// Writes paused on the hash's node hold A's DEL of it back, not the
	// node's own SCRIPT FLUSH: the reply must wait for the DEL all the
	// same.
	if err := store.Do(context.Background(), "CLIENT", "PAUSE", "300", "WRITE").Error(); err != nil {
		t.Fatal(err)
	}
	if got := a.do("SCRIPT", "FLUSH"); got != "+OK\r\n" {
		t.Fatalf("SCRIPT FLUSH through A: %q", got)
	}
	// A's reply to the flush comes once the hash B looks scripts up in is
	// deleted too.
	if n, err := store.Do(context.Background(), "EXISTS", "sluice.scripts").AsInt64(); err != nil || n != 0 {
		t.Fatalf("sluice.scripts after SCRIPT FLUSH through A answered: EXISTS %d, %v", n, err)
	}
	for _, body := range []string{loaded, ran} {
		sum := sha1.Sum([]byte(body))
		sha := hex.EncodeToString(sum[:])
		for _, k := range keyOf {
			if got := b.do("EVALSHA", sha, "1", k); !strings.HasPrefix(got, "-NOSCRIPT") {
				t.Errorf("EVALSHA through B on %s of %q after SCRIPT FLUSH through A: %q, want NOSCRIPT", k, body, got)
			}
		}
	}
}

// The scripts sluice replays are kept in a key any caller with access to
// it may write: a text stored under another script's SHA1 is not run for
// an EVALSHA of that script, which answers the node's NOSCRIPT.
func TestPassthroughReplaysOnlyTheScriptNamed(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	sum := sha1.Sum([]byte("return 'mine'"))
	sha := hex.EncodeToString(sum[:])
	if got := conn.do("HSET", "sluice.scripts", sha, "return 'not mine'"); got != ":1\r\n" {
		t.Fatalf("HSET sluice.scripts: %q", got)
	}
	if got := conn.do("EVALSHA", sha, "0"); !strings.HasPrefix(got, "-NOSCRIPT") {
		t.Errorf("EVALSHA of a script stored under another's SHA1: %q, want NOSCRIPT", got)
	}
}

// withPrefix is cmd with every % replaced by prefix, and the slot of its
// first argument that had one (-1: none).
func withPrefix(cmd []string, prefix string) ([]string, int) {
	args, sl := make([]string, len(cmd)), -1
	for i, a := range cmd {
		args[i] = strings.ReplaceAll(a, "%", prefix)
		if a != args[i] && sl < 0 {
			sl = slot.Of(args[i])
		}
	}
	return args, sl
}

// INFO asks every primary for its keyspace, but a primary that cannot
// answer does not make it an error: Redis's INFO never is one, and
// ioredis's ready check sends INFO at every connection, which it drops
// when INFO fails, so no ioredis client could connect while a primary is
// down, not even for THROTTLE, whose fallback is for that case. The
// keyspace sums the primaries that answered.
func TestPassthroughInfoWithAPrimaryDown(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	r := newForwarding(t, c)
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r})
	conn := dialRaw(t, addr)
	for i := range 30 {
		if got := conn.do("SET", "idown:"+strconv.Itoa(i), "v"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
	}
	primaryOf(t, c, "idown:0").Kill()
	for _, resp3 := range []bool{false, true} {
		conn := dialRaw(t, addr)
		prefix := "$"
		if resp3 {
			conn.do("HELLO", "3")
			prefix = "=" // a verbatim string
		}
		for _, cmd := range [][]string{{"INFO"}, {"INFO", "keyspace"}, {"INFO", "all"}} {
			got := conn.do(cmd...)
			if !strings.HasPrefix(got, prefix) || !strings.Contains(got, "# Keyspace\r\ndb0:keys=") {
				t.Errorf("RESP3 %v: %q with a primary down: %.120q, want the keyspace of the others", resp3, cmd, got)
			}
			if cmd[len(cmd)-1] != "keyspace" && !strings.Contains(got, "# Server\r\n") {
				t.Errorf("RESP3 %v: %q with a primary down: %.120q, want sluice's sections", resp3, cmd, got)
			}
		}
	}
}

// A client that pipelines reads of a large value and reads none of the
// replies is closed once they pass the hard output limit, as Redis closes
// it, on both serving paths: on a goroutine, the replies ready early
// (earlyWrite) were being written, blocked, below the limit, while the
// rest of the pipeline's piled up behind the blocked write, unbounded by it.
func TestPassthroughUnreadRepliesPastTheHardLimit(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, OutputLimit: proxy.OutputLimit{Hard: 8 << 20}}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		other := dialRaw(t, addr)
		if got := other.do("SET", "unread:big", strings.Repeat("v", 1<<20)); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		flood := dialRaw(t, addr)
		flood.c.(*net.TCPConn).SetReadBuffer(64 << 10)
		if got := flood.do("PING"); got != "+PONG\r\n" { // connected
			t.Fatalf("PING: %q", got)
		}
		// 24 MiB of replies, in one read: past the limit after the early
		// writes, and after what the sockets take (a few MiB).
		cmds := make([][]string, 24)
		for i := range cmds {
			cmds[i] = []string{"GET", "unread:big"}
		}
		flood.send(cmds...)
		// Not waitUntil's 5 s: once closed, the client's goroutine still
		// waits for the replies under way, 24 MiB, slow under -race.
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(other.do("INFO", "clients"), "connected_clients:1\r\n"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the client past the hard limit was not closed")
			}
		}
	})
}
