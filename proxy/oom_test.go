package proxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// oomErr is Redis's reply to a write refused at maxmemory (noeviction).
const oomErr = "-OOM command not allowed when used memory > 'maxmemory'.\r\n"

// TestThrottleAtMaxmemory: primaries at maxmemory with noeviction (README
// "When Redis fails"). A call that must take tokens answers Redis's OOM
// error, as the node words it, on each serving path and protocol; calls
// that write nothing (a denial, a peek) are decided, THROTTLE.RESET (a
// DEL) works, a split hot key's calls answer the OOM too, and no shard is
// taken as unhealthy nor any call decided by the fallback. Passthrough
// writes answer the node's own OOM; a transaction, queued in sluice,
// the node's EXECABORT at EXEC.
func TestThrottleAtMaxmemory(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ctx := context.Background()
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotKeys: []string{"hot:*"}})
	waitRouter(t, r)
	maxmemory := func(v string) {
		for _, n := range c.Nodes {
			if err := n.Do(ctx, "CONFIG", "SET", "maxmemory", v).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { maxmemory("0") })
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		maxmemory("0")
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		if resp3 {
			conn.do("HELLO", "3")
		}
		key := t.Name()
		hot := "hot:" + key
		if got := conn.do("THROTTLE", key+":denied", "1", "1", "3600"); got != "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:3600000\r\n" {
			t.Fatalf("taking the only token: %q", got)
		}
		conn.do("THROTTLE", hot, "900000000", "3000", "1")
		waitUntil(t, "the declared hot key is split", func() bool { return subBuckets(r, hot) >= 2 })
		maxmemory("1")

		if got := conn.do("THROTTLE", key+":new", "10", "1", "1"); got != oomErr {
			t.Errorf("a call that takes a token: %q, want %q", got, oomErr)
		}
		if got := conn.do("THROTTLE", key+":new", "10", "1", "1", "0"); got != "*5\r\n:0\r\n:10\r\n:10\r\n:-1\r\n:0\r\n" {
			t.Errorf("a peek: %q, want it decided", got)
		}
		if got := conn.do("THROTTLE", key+":denied", "1", "1", "3600"); len(got) < 16 || got[:16] != "*5\r\n:1\r\n:1\r\n:0\r\n" {
			t.Errorf("a denial: %q, want it decided", got)
		}
		if got := conn.do("THROTTLE", hot, "900000000", "3000", "1"); got != oomErr {
			t.Errorf("a split hot key's call: %q, want %q", got, oomErr)
		}
		if got := conn.do("THROTTLE.RESET", key+":denied"); got != ":1\r\n" {
			t.Errorf("THROTTLE.RESET: %q, want :1", got)
		}
		if got, want := conn.do("SET", key, "v"), directIn(t, c, resp3, slot.Of(key), "SET", key, "v"); got != want || got != oomErr {
			t.Errorf("passthrough SET: %q, the node %q, want %q", got, want, oomErr)
		}
		// A transaction is queued in sluice: QUEUED, where the node
		// answers OOM at once, then the node's EXECABORT at EXEC.
		tx := [][]string{{"MULTI"}, {"SET", key, "v"}, {"EXEC"}}
		conn.send(tx...)
		got := conn.read() + conn.read() + conn.read()
		node := dialRaw(t, nodeOf(t, c, key).Addr)
		if resp3 {
			node.do("HELLO", "3")
		}
		node.send(tx...)
		node.read()
		node.read()
		if want := "+OK\r\n+QUEUED\r\n" + node.read(); got != want {
			t.Errorf("MULTI SET EXEC: %q, want %q", got, want)
		}
		st := r.Stats().Cluster
		for _, s := range st.Shards {
			if !s.Healthy {
				t.Errorf("shard %s taken as unhealthy: %s", s.Addr, s.LastError)
			}
		}
		if d := st.Decisions; d[router.SourceLocal]+d[router.SourceOpen]+d[router.SourceClosed] != 0 {
			t.Errorf("decisions by source %v: the fallback decided", d)
		}
	})
}

func nodeOf(t *testing.T, c *clustertest.Cluster, key string) *clustertest.Node {
	t.Helper()
	n, err := c.Primary(context.Background(), slot.Of(key))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
