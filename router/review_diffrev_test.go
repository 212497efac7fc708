package router_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A key reset in the cluster between two outages starts the second one
// full, as its bucket is: the fallback bucket the first outage drained,
// kept for a flapping shard, is not the key's state after the reset. (It
// was kept, and the second outage denied a key just reset.)
func TestResetBetweenOutagesForgetsTheKeptFallbackBucket(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	key := keysIn(1, 0, 5460, "flapreset:")[0]
	iv := interval(t, 4, 1, 3_600_000_000) // 4 tokens, one more an hour
	r := newRouter(t, c.Addrs(), router.ClusterConfig{Share: 1})
	waitConnected(t, r)
	victim := c.Nodes[0]
	localAllowed := func(outage string) int {
		t.Helper()
		if err := victim.Pause(); err != nil {
			t.Fatal(err)
		}
		allowed, local := 0, 0
		for i := 0; local < 10; i++ {
			if i == 1000 {
				t.Fatalf("%s: the key never went to the fallback", outage)
			}
			res := decide(r, key, iv)
			if res.Source != router.SourceLocal {
				continue
			}
			local++
			if !res.Limited {
				allowed++
			}
		}
		if err := victim.Resume(); err != nil {
			t.Fatal(err)
		}
		return allowed
	}
	if got := localAllowed("first outage"); got != 4 {
		t.Fatalf("first outage: the fallback admitted %d of 10, want its 4", got)
	}
	waitFor(t, 10*time.Second, "every shard healthy", func() bool {
		for _, s := range stats(r).Shards {
			if !s.Healthy {
				return false
			}
		}
		return true
	})
	res := make([]router.Result, 1)
	router.SubmitAndWait(r, context.Background(), []router.Request{{Op: router.Reset, Key: key}}, res)
	if res[0].Err != nil || res[0].Source == router.SourceLocal {
		t.Fatalf("reset with the shard back: %+v, want it done in the cluster", res[0])
	}
	if got := localAllowed("second outage, after the reset"); got != 4 {
		t.Fatalf("second outage, after the key was reset: the fallback admitted %d of 10, want its 4 (the bucket is full)", got)
	}
}
