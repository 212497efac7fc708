package router_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A burst larger than two sub-buckets hold, decided together, still finds
// the tokens of every sub-bucket: a call denied by one tries the others
// that seem to hold its cost, not only one sibling, or a split in three
// denies a third of its capacity until the next burst.
func TestHotKeyBurstFindsEverySubBucket(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	const key = "burst"
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{key}})
	waitConnected(t, r)
	const capacity = 30
	iv := interval(t, capacity, capacity, 3600_000_000) // an hour: nothing refills meanwhile
	if res := decide(r, key, iv); res.Err != nil || res.Limited {
		t.Fatalf("the first call: %+v", res)
	}
	waitFor(t, 2*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, key); return ok })
	sp, _ := marker(ctx, cl, key)
	parts := len(sp.Tags)
	if parts != 3 {
		t.Fatalf("split in %d, want one sub-bucket per primary", parts)
	}
	reqs := make([]router.Request, 120)
	for i := range reqs {
		reqs[i] = router.Request{Key: key, Interval: iv, Cost: 1}
	}
	res := make([]router.Result, len(reqs))
	router.SubmitAndWait(r, ctx, reqs, res)
	allowed := 1
	for _, x := range res {
		if x.Err != nil {
			t.Fatal(x.Err)
		}
		if !x.Limited {
			allowed++
		}
	}
	if allowed > capacity || allowed < capacity-parts {
		t.Fatalf("%d of %d calls allowed on a bucket of %d split in %d, want %d to %d", allowed, 1+len(reqs), capacity, parts, capacity-parts, capacity)
	}
}
