package router_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// The fallback buckets of an outage, across the next one, on one cluster
// whose first primary is paused and resumed.
func TestFallbackBucketsAcrossOutages(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	iv := interval(t, 4, 1, 3_600_000_000) // 4 tokens, one more an hour
	r := newRouter(t, c.Addrs(), router.ClusterConfig{Share: 1})
	waitConnected(t, r)
	o := outages{r: r, victim: c.Nodes[0], iv: iv}

	// A shard that fails, comes back and fails again does not grant its
	// keys a fresh share of their limit at each failure: the first
	// outage's fallback bucket, not full yet, is kept once the shard is
	// back, and the second outage goes on from it. (It was released as
	// the shard came back, so each outage started every bucket full: a
	// flapping shard admitted a share of each limit per flap.)
	t.Run("a flapping shard grants its share once", func(t *testing.T) {
		key := keysIn(1, 0, 5460, "flap:")[0]
		if got := o.allowed(t, key, "first outage"); got != 4 {
			t.Fatalf("first outage: the fallback admitted %d of 10, want its 4", got)
		}
		waitFor(t, 10*time.Second, "the key decided in the cluster again", func() bool {
			return decide(r, key, iv).Source == router.SourceCluster
		})
		o.healthy(t)
		if n := r.LocalBuckets(); n != 1 {
			t.Fatalf("%d fallback buckets held once the shard is back, want the drained one kept", n)
		}
		if got := o.allowed(t, key, "second outage"); got != 0 {
			t.Fatalf("second outage, moments after the first: the fallback admitted %d of 10, want 0 (its bucket drained in the first)", got)
		}
	})

	// A key reset in the cluster between two outages starts the second
	// one full, as its bucket is: the fallback bucket the first outage
	// drained, kept for a flapping shard, is not the key's state after
	// the reset. (It was kept, and the second outage denied a key just
	// reset.)
	t.Run("a reset between outages forgets the kept bucket", func(t *testing.T) {
		key := keysIn(1, 0, 5460, "flapreset:")[0]
		if got := o.allowed(t, key, "first outage"); got != 4 {
			t.Fatalf("first outage: the fallback admitted %d of 10, want its 4", got)
		}
		o.healthy(t)
		res := make([]router.Result, 1)
		router.SubmitAndWait(r, context.Background(), []router.Request{{Op: router.Reset, Key: key}}, res)
		if res[0].Err != nil || res[0].Source == router.SourceLocal {
			t.Fatalf("reset with the shard back: %+v, want it done in the cluster", res[0])
		}
		if got := o.allowed(t, key, "second outage, after the reset"); got != 4 {
			t.Fatalf("second outage, after the key was reset: the fallback admitted %d of 10, want its 4 (the bucket is full)", got)
		}
	})
}

// outages pauses and resumes a cluster's primary under a router.
type outages struct {
	r      *router.Cluster
	victim *clustertest.Node
	iv     bucket.Interval
}

// allowed pauses the victim and counts what the fallback admits of 10
// calls on key, once the key is decided by it; then resumes the victim.
func (o outages) allowed(t *testing.T, key, outage string) int {
	t.Helper()
	if err := o.victim.Pause(); err != nil {
		t.Fatal(err)
	}
	allowed, local := 0, 0
	for i := 0; local < 10; i++ {
		if i == 1000 {
			t.Fatalf("%s: the key never went to the fallback", outage)
		}
		res := decide(o.r, key, o.iv)
		if res.Source != router.SourceLocal {
			continue
		}
		local++
		if !res.Limited {
			allowed++
		}
	}
	if err := o.victim.Resume(); err != nil {
		t.Fatal(err)
	}
	return allowed
}

// healthy waits until the router finds every shard healthy again.
func (o outages) healthy(t *testing.T) {
	t.Helper()
	waitFor(t, 10*time.Second, "every shard healthy", func() bool {
		for _, s := range stats(o.r).Shards {
			if !s.Healthy {
				return false
			}
		}
		return true
	})
}
