package proxy_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// Redis 7 functions through sluice, as a cluster client gets them from
// the cluster: FUNCTION LOAD, DELETE, FLUSH and RESTORE go to every
// primary (Redis's request_policy all_shards), LIST and DUMP are any
// one's, and FCALL then runs for keys on each primary. A node that lost
// a library answers its own error: functions are part of a node's data,
// replicated and persisted, and sluice does not load them again.
func TestPassthroughFunctions(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	admin := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, AllowAdmin: true}))
	ctx := context.Background()
	const lib = "#!lua name=fnlib\n" +
		"redis.register_function('fnset', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n" +
		"redis.register_function{function_name='fnget', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n" +
		"redis.register_function('fnnone', function() return 'none' end)"
	if got := conn.do("FUNCTION", "LOAD", lib); got != "$5\r\nfnlib\r\n" {
		t.Fatalf("FUNCTION LOAD: %q, want the library's name", got)
	}
	libraries := func(n *clustertest.Node) string {
		v, err := n.Do(ctx, "FUNCTION", "LIST").ToArray()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Repeat("x", len(v))
	}
	for _, n := range c.Nodes {
		if got := libraries(n); got != "x" {
			t.Errorf("%s holds %d libraries after FUNCTION LOAD, want 1", n.Addr, len(got))
		}
	}
	// A key on each primary: FCALL and FCALL_RO run there.
	var keys []string
	for _, n := range c.Nodes {
		keys = append(keys, keyWhere(t, c, "fn", "k", func(p *clustertest.Node, _ string) bool { return p.Addr == n.Addr }))
	}
	for _, k := range keys {
		if got := conn.do("FCALL", "fnset", "1", k, "v-"+k); got != "+OK\r\n" {
			t.Errorf("FCALL fnset 1 %s: %q", k, got)
		}
		if got, want := conn.do("FCALL_RO", "fnget", "1", k), "$"+strconv.Itoa(len("v-"+k))+"\r\nv-"+k+"\r\n"; got != want {
			t.Errorf("FCALL_RO fnget 1 %s: %q, want %q", k, got, want)
		}
	}
	if got := conn.do("FCALL", "fnnone", "0"); got != "$4\r\nnone\r\n" {
		t.Errorf("FCALL fnnone 0: %q", got)
	}
	for _, cmd := range [][]string{
		{"FUNCTION", "LOAD", lib},                 // exists already: the node's error
		{"FUNCTION", "LOAD", "REPLACE", lib},      // the name
		{"FUNCTION", "LIST", "LIBRARYNAME", "fn"}, // the same on every node
		{"FCALL", "nosuchfn", "0"},
		{"FUNCTION", "DELETE", "nosuchlib"},
	} {
		if got, want := conn.do(cmd...), direct(t, c, -1, cmd...); got != want {
			t.Errorf("%q: %q, want the node's %q", cmd, got, want)
		}
	}
	dump := conn.do("FUNCTION", "DUMP")
	if want := direct(t, c, -1, "FUNCTION", "DUMP"); dump != want {
		t.Fatalf("FUNCTION DUMP: %q, want the node's %q", dump, want)
	}
	payload := dump[strings.Index(dump, "\r\n")+2 : len(dump)-2]
	// FLUSH and RESTORE may replace every library: administration.
	for _, cmd := range [][]string{{"FUNCTION", "FLUSH"}, {"FUNCTION", "RESTORE", payload, "FLUSH"}} {
		if got := conn.do(cmd...); !strings.HasPrefix(got, "-ERR sluice forwards '"+cmd[0]+" "+cmd[1]+"' only with --allow-admin") {
			t.Errorf("%s %s without --allow-admin: %q", cmd[0], cmd[1], got)
		}
	}
	if got := admin.do("FUNCTION", "FLUSH"); got != "+OK\r\n" {
		t.Fatalf("FUNCTION FLUSH: %q", got)
	}
	for _, n := range c.Nodes {
		if got := libraries(n); got != "" {
			t.Errorf("%s holds %d libraries after FUNCTION FLUSH", n.Addr, len(got))
		}
	}
	if got := admin.do("FUNCTION", "RESTORE", payload); got != "+OK\r\n" {
		t.Fatalf("FUNCTION RESTORE: %q", got)
	}
	for _, k := range keys {
		if got := conn.do("FCALL", "fnset", "1", k, "w"); got != "+OK\r\n" {
			t.Errorf("FCALL fnset 1 %s after FUNCTION RESTORE: %q", k, got)
		}
	}
	// A primary that lost the library answers its own error.
	lost := primaryOf(t, c, keys[0])
	if err := lost.Do(ctx, "FUNCTION", "FLUSH").Error(); err != nil {
		t.Fatal(err)
	}
	if got, want := conn.do("FCALL", "fnset", "1", keys[0], "w"), direct(t, c, -1, "FCALL", "nosuchfn", "0"); got != want {
		t.Errorf("FCALL on %s, whose primary lost the library: %q, want the node's %q", keys[0], got, want)
	}
	if got := conn.do("FUNCTION", "DELETE", "fnlib"); got != "+OK\r\n" && !strings.HasPrefix(got, "-ERR Library not found") {
		t.Fatalf("FUNCTION DELETE: %q", got)
	}
	for _, n := range c.Nodes {
		if got := libraries(n); got != "" {
			t.Errorf("%s holds %d libraries after FUNCTION DELETE", n.Addr, len(got))
		}
	}
}

// SCRIPT HELP and FUNCTION HELP are the same text on every node: any
// one answers, as a cluster client sends them to any node.
func TestPassthroughScriptingHelp(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	for _, cmd := range [][]string{{"SCRIPT", "HELP"}, {"FUNCTION", "HELP"}} {
		want := direct(t, c, -1, cmd...)
		if !strings.HasPrefix(want, "*") {
			t.Fatalf("%q on a node: %q", cmd, want)
		}
		if got := conn.do(cmd...); got != want {
			t.Errorf("%q: %q, want the node's %q", cmd, got, want)
		}
	}
	// Refused, each for its own reason, not for a key it never has.
	for _, tc := range []struct{ cmd, why string }{
		{"SCRIPT DEBUG YES", "the debug mode would hold a connection"},
		{"FUNCTION STATS", "a primary's answer would say nothing of the others"},
	} {
		if got := conn.do(strings.Fields(tc.cmd)...); !strings.HasPrefix(got, "-ERR sluice does not forward") || !strings.Contains(got, tc.why) {
			t.Errorf("%s: %q, want it refused because %s", tc.cmd, got, tc.why)
		}
	}
}

// A script may return a table nested as deep as Lua's C stack allows
// (about 7,990 levels), which Redis sends as it is: through sluice too,
// on both serving paths and protocols, and the command pipelined behind
// it on the same node gets its own reply. Read as a protocol error, it
// broke the node's shared connection: that client's commands, and other
// clients' in flight on it, were answered an error.
func TestPassthroughDeeplyNestedScriptReply(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	const key = "{deep}k"
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		if resp3 {
			conn.do("HELLO", "3")
		}
		if got := conn.do("SET", key, "v"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		for _, depth := range []int{600, 7990} {
			eval := []string{"EVAL", "local t = {1} for i = 1, " + strconv.Itoa(depth) + " do t = {t, i} end return t", "1", key}
			// {{{1}, 1}, 2}, ...: the same bytes in RESP2 and RESP3.
			var want strings.Builder
			want.WriteString(strings.Repeat("*2\r\n", depth) + "*1\r\n:1\r\n")
			for i := 1; i <= depth; i++ {
				want.WriteString(":" + strconv.Itoa(i) + "\r\n")
			}
			if depth == 600 {
				// The node's own answer, read as bytes: the test's reader
				// is the one under test.
				node := dialRaw(t, primaryOf(t, c, key).Addr)
				node.send(eval)
				got := make([]byte, want.Len())
				if _, err := io.ReadFull(node.br, got); err != nil || string(got) != want.String() {
					t.Fatalf("the node answers a table %d levels deep: %.40q, %v", depth, got, err)
				}
			}
			conn.send(eval, []string{"GET", key})
			if got := conn.read(); got != want.String() {
				t.Errorf("a table %d levels deep: %.120q (%d bytes), want the node's %d bytes", depth, got, len(got), want.Len())
			}
			if got := conn.read(); got != "$1\r\nv\r\n" {
				t.Errorf("GET after a table %d levels deep: %q", depth, got)
			}
		}
	})
}

// A node running a script past its busy-reply-threshold answers BUSY to
// everything else: it cannot decide a bucket then, as a LOADING node
// cannot. THROTTLE on its keys is decided by the fallback, on both serving
// paths, and the shard is unhealthy until the script ends; THROTTLE does
// not answer Redis's BUSY error, which is no decision.
func TestThrottleOnANodeBusyWithAScript(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ctx := context.Background()
	const key = "{busy}t"
	victim := primaryOf(t, c, router.KeyPrefix+key)
	if err := victim.Do(ctx, "CONFIG", "SET", "busy-reply-threshold", "10").Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Do(ctx, "CONFIG", "SET", "busy-reply-threshold", "5000") })
	for _, loops := range []int{0, -1} {
		// The backend timeout is long: BUSY, not a timeout, is the fault.
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: 5 * time.Second, HotThreshold: -1})
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Loops: loops}))
		if got := conn.do("THROTTLE", key, "10", "1", "1s"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
			t.Fatalf("THROTTLE: %q", got)
		}
		// A script that only reads, so SCRIPT KILL ends it (in 30 s at most).
		script := dialRaw(t, victim.Addr)
		script.send([]string{"EVAL", "local t0 = redis.call('TIME') while true do local t = redis.call('TIME') if t[1] - t0[1] > 30 then return 0 end end", "0"})
		ping := dialRaw(t, victim.Addr)
		waitUntil(t, "the node answers BUSY", func() bool { return strings.HasPrefix(ping.do("PING"), "-BUSY ") })
		if got := conn.do("THROTTLE", key, "10", "1", "1s"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
			t.Errorf("loops %d: THROTTLE while the node is busy: %q, want the fallback's decision", loops, got)
		}
		if s := shardStatsOf(t, r, victim.Addr); s.Healthy || s.ErrorKinds["busy"] == 0 {
			t.Errorf("loops %d: the busy node's shard: %+v, want it unhealthy for BUSY", loops, s)
		}
		if got := ping.do("SCRIPT", "KILL"); got != "+OK\r\n" {
			t.Fatalf("SCRIPT KILL: %q", got)
		}
		if got := script.read(); !strings.HasPrefix(got, "-") {
			t.Fatalf("the killed script: %q", got)
		}
		waitUntil(t, "the shard is healthy again", func() bool { return shardStatsOf(t, r, victim.Addr).Healthy })
	}
}

// shardStatsOf is the state of r's shard at addr.
func shardStatsOf(t *testing.T, r *router.Cluster, addr string) router.ShardStats {
	t.Helper()
	for _, s := range r.Stats().Cluster.Shards {
		if s.Addr == addr {
			return s
		}
	}
	t.Fatalf("no shard %s", addr)
	return router.ShardStats{}
}

// SCRIPT KILL and FUNCTION KILL reach the primary whose script is busy,
// each part on a connection of its own (the script's holds the shared one
// its call went on), and answer as that node does: +OK when it ended the
// script, BUSY for the wrong kind, UNKILLABLE for one that wrote, and
// NOTBUSY when no primary runs one. On both serving paths.
func TestScriptKillReachesTheBusyPrimary(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ctx := context.Background()
	const key = "{kill}x"
	victim := primaryOf(t, c, key)
	if err := victim.Do(ctx, "CONFIG", "SET", "busy-reply-threshold", "10").Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Do(ctx, "CONFIG", "SET", "busy-reply-threshold", "5000") })
	r := newForwarding(t, c)
	notBusy := direct(t, c, -1, "SCRIPT", "KILL")
	if !strings.HasPrefix(notBusy, "-NOTBUSY ") {
		t.Fatalf("SCRIPT KILL on an idle node: %q", notBusy)
	}
	// Each script ends by itself after a few seconds if the kill fails.
	const reads = "local t0 = redis.call('TIME') while true do local t = redis.call('TIME') if t[1] - t0[1] > 20 then return 0 end end"
	const writes = "redis.call('SET', KEYS[1], '1') local t0 = redis.call('TIME') while true do local t = redis.call('TIME') if t[1] - t0[1] > 1 then return 0 end end"
	ping := dialRaw(t, victim.Addr)
	busy := func(conn *rawConn, script string) {
		t.Helper()
		conn.send([]string{"EVAL", script, "1", key})
		waitUntil(t, "the node answers BUSY", func() bool { return strings.HasPrefix(ping.do("PING"), "-BUSY ") })
	}
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		for _, cmd := range []string{"SCRIPT KILL", "FUNCTION KILL"} {
			if got := conn.do(strings.Fields(cmd)...); got != notBusy {
				t.Errorf("loops %d: %s with no script running: %q, want the nodes' %q", loops, cmd, got, notBusy)
			}
		}
		script := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		busy(script, reads)
		if got := conn.do("FUNCTION", "KILL"); !strings.HasPrefix(got, "-BUSY ") {
			t.Errorf("loops %d: FUNCTION KILL of a script: %q, want the node's BUSY", loops, got)
		}
		if got := conn.do("SCRIPT", "KILL"); got != "+OK\r\n" {
			t.Fatalf("loops %d: SCRIPT KILL of a busy script: %q", loops, got)
		}
		if got := script.read(); !strings.HasPrefix(got, "-ERR Script killed by user with SCRIPT KILL") {
			t.Errorf("loops %d: the killed script's caller got %q", loops, got)
		}
		busy(script, writes)
		if got := conn.do("SCRIPT", "KILL"); !strings.HasPrefix(got, "-UNKILLABLE ") {
			t.Errorf("loops %d: SCRIPT KILL of a script that wrote: %q, want the node's UNKILLABLE", loops, got)
		}
		if got := script.read(); got != ":0\r\n" {
			t.Errorf("loops %d: the script that wrote ended with %q", loops, got)
		}
		if got := conn.do("GET", key); got != "$1\r\n1\r\n" {
			t.Errorf("loops %d: GET after the scripts: %q", loops, got)
		}
	}
	t.Run("a hung primary", func(t *testing.T) { scriptKillOnAHungPrimary(t, c) })
}

// A KILL on its own connection gets the forward timeout of any forwarded
// command: a primary that hangs (stopped) does not hold the caller, nor
// its commands behind the KILL, for ever.
func scriptKillOnAHungPrimary(t *testing.T, c *clustertest.Cluster) {
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), ForwardTimeout: 300 * time.Millisecond, HotThreshold: -1})
	waitRouter(t, r)
	victim := primaryOf(t, c, "{hung}x")
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		if err := victim.Pause(); err != nil {
			t.Fatal(err)
		}
		conn.send([]string{"SCRIPT", "KILL"}, []string{"PING"})
		got, pong := conn.read(), conn.read()
		if err := victim.Resume(); err != nil {
			t.Fatal(err)
		}
		if want := "-ERR sluice: connection to " + victim.Addr + " failed: " + router.ErrNoReply.Error(); !strings.HasPrefix(got, want) || pong != "+PONG\r\n" {
			t.Errorf("loops %d: SCRIPT KILL with a primary stopped: %q then %q, want %q... then PONG", loops, got, pong, want)
		}
	}
}
