package router_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
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
