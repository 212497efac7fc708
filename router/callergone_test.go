package router_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A caller that goes away (a cancelled context, or one whose own deadline
// passed) is not the shard's fault, nor is a reply that is the caller's
// (WRONGTYPE): the shard stays healthy and counts no fault.
func TestCallerErrorsAreNoShardFault(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{})
	waitConnected(t, r)
	key := keysIn(1, 0, 5460, "caller:")[0]
	iv := interval(t, 4, 1, 3_600_000_000)
	if res := decide(r, key, iv); res.Err != nil || res.Source != router.SourceCluster {
		t.Fatalf("got %+v, want a cluster decision", res)
	}
	addr := c.Nodes[0].Addr
	check := func(what string) {
		t.Helper()
		if s := shardStats(t, r, addr); !s.Healthy || s.Errors != 0 {
			t.Fatalf("%s: shard %s marked %+v, want healthy with no fault", what, addr, s)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := make([]router.Result, 1)
	router.SubmitAndWait(r, ctx, []router.Request{{Key: key, Interval: iv, Cost: 1}}, res)
	check("a cancelled caller")

	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	router.SubmitAndWait(r, ctx, []router.Request{{Key: key, Interval: iv, Cost: 1}}, res)
	check("a caller past its deadline")
	router.SubmitAndWait(r, ctx, []router.Request{{Op: router.Reset, Key: key}}, res)
	check("a reset past its caller's deadline")

	wrong := keysIn(2, 0, 5460, "caller:")[1]
	if err := c.Nodes[0].Do(context.Background(), "SET", router.KeyPrefix+wrong, "x").Error(); err != nil {
		t.Fatal(err)
	}
	res[0] = decide(r, wrong, iv)
	t.Logf("WRONGTYPE: %+v", res[0])
	if res[0].Err == nil {
		t.Fatalf("a bucket over a string: got %+v, want an error", res[0])
	}
	check("WRONGTYPE")
	// None of those errors is a decision: INFO backend's decisions_cluster
	// counts what sluice_decisions_total counts, the first call alone.
	if n := r.Decisions(router.SourceCluster); n != 1 {
		t.Fatalf("Decisions(cluster) = %d after one decision and three errors, want 1", n)
	}
}
