package router_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// INFO's rate of a hot key is its decisions here whether or not this
// instance detects hot keys itself: with --hot-threshold 0, a declared
// key (or one followed from another instance's split) was listed at
// rate 0 however busy, and the 16 listed were not the busiest.
func TestReviewHotfaultRateWithDetectionOff(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"rated"}, HotThreshold: -1})
	waitConnected(t, r)
	iv := interval(t, 1000, 1000, 1_000_000)
	decide(r, "rated", iv)
	waitFor(t, 2*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, "rated"); return ok })
	waitFor(t, 2*time.Second, "a rate in INFO", func() bool {
		for range 50 {
			decide(r, "rated", iv)
		}
		hot := stats(r).Hot
		return len(hot) == 1 && hot[0].Rate > 0
	})
}

// THROTTLE.RESET of a split key whose sub-bucket's shard is known to be
// down skips that shard, as every call to an unhealthy shard does: it
// answered only after the backend timeout, waiting on a DEL of a
// sub-bucket the new split never uses (its name changes). The sub-buckets
// on healthy shards are still deleted.
func TestHotKeyResetSkipsAnUnhealthySubBucket(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	const timeout = 500 * time.Millisecond
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"gone"}, Timeout: timeout})
	waitConnected(t, r)
	iv := interval(t, 30, 1, 3600_000_000)
	decide(r, "gone", iv)
	var sp lua.Split
	waitFor(t, 2*time.Second, "split marker", func() bool {
		var ok bool
		sp, ok = marker(ctx, cl, "gone")
		return ok
	})
	for range 20 {
		decide(r, "gone", iv)
	}
	parent, err := c.Primary(ctx, slot.Of(router.KeyPrefix+"gone"))
	if err != nil {
		t.Fatal(err)
	}
	var victim *clustertest.Node
	var victimTag string
	for _, tag := range sp.Tags {
		if p, _ := c.Primary(ctx, slot.Of("{"+tag+"}")); p != nil && p != parent {
			victim, victimTag = p, tag
			break
		}
	}
	if victim == nil {
		t.Fatalf("no sub-bucket of %v off the parent's primary", sp.Tags)
	}
	var healthySubs []string
	for i, tag := range sp.Tags {
		if tag != victimTag {
			healthySubs = append(healthySubs, sp.SubKey(i, "gone"))
		}
	}
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	// A plain key of the victim's slot marks its shard down.
	decide(r, "{"+victimTag+"}plain", iv)
	waitFor(t, 2*time.Second, "the paused shard unhealthy", func() bool { return !shardStats(t, r, victim.Addr).Healthy })
	res := make([]router.Result, 1)
	start := time.Now()
	router.SubmitAndWait(r, ctx, []router.Request{{Op: router.Reset, Key: "gone"}}, res)
	if took := time.Since(start); took > timeout/2 {
		t.Fatalf("reset took %v, waiting on the unhealthy shard (timeout %v)", took, timeout)
	}
	if res[0].Err != nil || !res[0].Existed {
		t.Fatalf("reset: got %+v, want the split deleted", res[0])
	}
	for _, k := range append(healthySubs, router.KeyPrefix+"gone") {
		if n, err := cl.Do(ctx, cl.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
			t.Fatalf("%s still exists after the reset (%v)", k, err)
		}
	}
}
