package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// With --read-from-replicas an EVAL_RO runs on a replica: SCRIPT KILL
// must reach it there, as a cluster client's sent to that replica would,
// or the replica answers BUSY to every read of its slots until the
// script ends by itself. On both serving paths.
func TestScriptKillReachesABusyReplica(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	ctx := context.Background()
	const key = "{killro}x"
	replica := replicasOf(t, c, primaryOf(t, c, key))[0]
	if err := replica.Do(ctx, "CONFIG", "SET", "busy-reply-threshold", "10").Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Do(ctx, "CONFIG", "SET", "busy-reply-threshold", "5000") })
	// It ends by itself after a few seconds if the kill fails.
	const reads = "local t0 = redis.call('TIME') while true do local t = redis.call('TIME') if t[1] - t0[1] > 5 then return 0 end end"
	ping := dialRaw(t, replica.Addr)
	for _, loops := range []int{1, -1} {
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true})
		waitRouter(t, r)
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		conn, script := dialRaw(t, addr), dialRaw(t, addr)
		// The router learns the replicas from the slot map, which a
		// replica may join after the cluster formed.
		waitUntil(t, "a read reaches the replica", func() bool {
			before := cmdCalls(replica, "get")
			script.do("GET", key)
			return cmdCalls(replica, "get") > before
		})
		script.send([]string{"EVAL_RO", reads, "1", key})
		waitUntil(t, "the replica answers BUSY", func() bool { return strings.HasPrefix(ping.do("PING"), "-BUSY ") })
		if got := conn.do("SCRIPT", "KILL"); got != "+OK\r\n" {
			t.Errorf("loops %d: SCRIPT KILL of a script busy on a replica: %q, want +OK", loops, got)
		}
		if got := script.read(); !strings.HasPrefix(got, "-ERR Script killed by user with SCRIPT KILL") {
			t.Errorf("loops %d: the script's caller got %q", loops, got)
		}
	}
}
