package router_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A shard that fails, comes back and fails again does not grant its keys a
// fresh share of their limit at each failure: the first outage's fallback
// bucket, not full yet, is kept once the shard is back, and the second
// outage goes on from it. (It was released as the shard came back, so
// each outage started every bucket full: a flapping shard admitted a share
// of each limit per flap.)
func TestFlappingShardGrantsItsShareOnce(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	key := keysIn(1, 0, 5460, "flap:")[0]
	iv := interval(t, 4, 1, 3_600_000_000) // 4 tokens, one more an hour
	r := newRouter(t, c.Addrs(), router.ClusterConfig{Share: 1})
	waitConnected(t, r)
	victim := c.Nodes[0]
	// localAllowed pauses the victim and counts what the fallback admits
	// of 10 calls, once the key is decided by it.
	localAllowed := func(outage string) int {
		t.Helper()
		if err := victim.Pause(); err != nil {
			t.Fatal(err)
		}
		allowed := 0
		local := 0
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
	backInCluster := func() {
		t.Helper()
		waitFor(t, 10*time.Second, "the key decided in the cluster again", func() bool {
			return decide(r, key, iv).Source == router.SourceCluster
		})
		waitFor(t, 5*time.Second, "every shard healthy", func() bool {
			for _, s := range stats(r).Shards {
				if !s.Healthy {
					return false
				}
			}
			return true
		})
	}
	if got := localAllowed("first outage"); got != 4 {
		t.Fatalf("first outage: the fallback admitted %d of 10, want its 4", got)
	}
	backInCluster()
	if n := r.LocalBuckets(); n != 1 {
		t.Fatalf("%d fallback buckets held once the shard is back, want the drained one kept", n)
	}
	if got := localAllowed("second outage"); got != 0 {
		t.Fatalf("second outage, moments after the first: the fallback admitted %d of 10, want 0 (its bucket drained in the first)", got)
	}
}
