package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A cluster that is down as a whole (one primary gone, full coverage
// required: every node answers CLUSTERDOWN) has every key decided by the
// fallback, and the shard of each such key is shown unhealthy, of
// CLUSTERDOWN: INFO, metrics and logs must not hide the outage a decision
// has met. On the loops, the node's refusal of the whole script call takes
// the calls to the goroutine path, which must still classify it.
func TestClusterDownMarksTheShardOfEveryFallenBackKey(t *testing.T) {
	// The outage lasts from the pause to the FAIL, a node timeout or
	// more, and from the resume to the FAIL undone, two node timeouts:
	// half a second is still hundreds of times what a healthy node takes
	// to answer a ping on a loaded machine.
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: 500 * time.Millisecond})
	victim := c.Nodes[0]
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		// Long enough that no call before the outage, nor one of its
		// CLUSTERDOWN answers, is decided by the fallback for being slow
		// on a loaded machine.
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1})
		cfg.Decider, cfg.Forwarder = r, r
		cl := dialRaw(t, serveConfig(t, cfg))
		// Keys whose buckets (under sluice's prefix) live on the live
		// primaries.
		var keys []string
		for _, n := range c.Nodes[1:] {
			keys = append(keys, strings.TrimPrefix(nameOn(t, c, n, router.KeyPrefix+"k"+strconv.Itoa(cfg.Loops)+"-"), router.KeyPrefix))
		}
		for _, k := range keys {
			if got := cl.do("THROTTLE", k, "100", "100", "60s"); !strings.HasPrefix(got, "*5\r\n:0\r\n:100\r\n:99\r\n") {
				t.Fatalf("THROTTLE %s before the outage: %q", k, got)
			}
		}
		// Counted from here: a decision the fallback made before (a slow
		// call) would otherwise pass for one of the outage's.
		local := r.Stats().Cluster.Decisions[router.SourceLocal]
		if err := victim.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { victim.Resume() })
		waitUntil(t, "the cluster is down", func() bool { return clusterState(c) == "fail" })
		for i := 0; i < 20; i++ {
			for _, k := range keys {
				cl.do("THROTTLE", k, "100", "100", "60s")
			}
		}
		st := r.Stats().Cluster
		if st.Decisions[router.SourceLocal] == local {
			t.Fatalf("no decision by the fallback while the cluster is down: %+v", st)
		}
		for _, n := range c.Nodes[1:] {
			for _, s := range st.Shards {
				if s.Addr == n.Addr && (s.Healthy || s.ErrorKinds["clusterdown"] == 0) {
					t.Errorf("shard %s healthy=%v (errors %v) while its keys fell back: %s", s.Addr, s.Healthy, s.ErrorKinds, fmt.Sprint(st.Shards))
				}
			}
		}
		if err := victim.Resume(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the cluster is up again", func() bool { return clusterState(c) == "ok" })
	})
}

// clusterState is cluster_state as a live node sees it.
func clusterState(c *clustertest.Cluster) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, _ := c.Nodes[1].Do(ctx, "CLUSTER", "INFO").ToString()
	_, state, _ := strings.Cut(info, "cluster_state:")
	state, _, _ = strings.Cut(state, "\r\n")
	return state
}
