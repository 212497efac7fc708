package proxy_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// THROTTLE.RESET answers 1 only for a bucket not yet full (README
// "THROTTLE"), split or not: a split key nothing was taken from, or whose
// sub-buckets are all full again (a key idle through its cool-down, its
// marker still renewed), answered 1, because a marker was there to
// delete. One with tokens taken answers 1.
func TestReviewHotfaultResetOfAFullSplitKey(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), HotKeys: []string{"hot:*"}, ProbeInterval: 50 * time.Millisecond})
	cl := newGoRedis(t, serveConfig(t, proxy.Config{Decider: r}))
	ctx := t.Context()
	for _, tc := range []struct {
		key  string
		cost int
		want int64
	}{{"hot:full", 0, 0}, {"hot:taken", 1, 1}} {
		throttle(t, cl, "THROTTLE", tc.key, 30, 1, "1h", 0)
		waitUntil(t, tc.key+" is split", func() bool { return subBuckets(r, tc.key) >= 2 })
		for range 5 {
			throttle(t, cl, "THROTTLE", tc.key, 30, 1, "1h", tc.cost)
		}
		if got, err := cl.Do(ctx, "THROTTLE.RESET", tc.key).Int64(); err != nil || got != tc.want {
			t.Errorf("THROTTLE.RESET %s after calls of cost %d: got %d, %v; want %d", tc.key, tc.cost, got, err, tc.want)
		}
	}
}
