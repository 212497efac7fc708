package router

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A call on a hot key sent to its own bucket while the split was being
// made, and answered "split", is decided on the sub-buckets after a
// call the client sent later, which started on the split once this
// instance knew it: a peek then reports the later call's tokens as
// taken (PATHS_LIMITS=1, seeds 1015 and 2841 under -race: a peek of a
// hot key never taken from answered 2997 of 3000). Whether the parent's
// step is in flight when the later call queues, or both go in one batch.
func TestSplitAnsweredCallKeepsItsPlace(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), HotKeys: []string{"*:hot"}, Share: 1})
	for _, inFlight := range []bool{true, false} {
		splitAnsweredCallKeepsItsPlace(t, c, ctx, "peeksplit"+strconv.FormatBool(inFlight)+":hot", inFlight)
	}
}

func splitAnsweredCallKeepsItsPlace(t *testing.T, c *Cluster, ctx context.Context, key string, inFlight bool) {
	iv, err := bucket.Limit{Capacity: 3000, Refill: 1, Period: 3600_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	peek := []Request{{Op: Take, Key: key, Interval: iv, Cost: 0}}
	var hk *hotKey
	for hk == nil || hk.split.Load() == nil {
		if ctx.Err() != nil {
			t.Fatal("the key was not split")
		}
		c.Decide(ctx, peek, make([]Result, 1))
		time.Sleep(10 * time.Millisecond)
		hk = (*c.hot.keys.Load())[key]
	}
	// The background work leaves the split alone from here: this instance
	// forgets it, as before its renewal was answered, while the parent
	// holds the marker.
	for !hk.renewing.CompareAndSwap(false, true) {
		if ctx.Err() != nil {
			t.Fatal("the split's renewal did not end")
		}
		time.Sleep(time.Millisecond)
	}
	st := hk.split.Load()
	hk.split.Store(nil)
	co := &hk.batch
	for {
		co.mu.Lock()
		if !co.busy {
			co.busy = true // the flush is this test's
			co.mu.Unlock()
			break
		}
		co.mu.Unlock()
		if ctx.Err() != nil {
			t.Fatal("the key's coalescer stayed busy")
		}
		time.Sleep(time.Millisecond)
	}
	dones := make(chan struct{}, 2)
	done := func([]int) { dones <- struct{}{} }
	first := make([]Result, 1)
	c.Submit(ctx, peek, first, done) // to the parent: the split is not known
	hk.split.Store(st)               // the renewal is answered
	later := make([]Result, 1)
	c.Submit(ctx, []Request{{Op: Take, Key: key, Interval: iv, Cost: 1}}, later, done)
	co.mu.Lock()
	q := co.queue
	if len(q) != 2 || q[0].st != nil || q[1].st != st {
		co.mu.Unlock()
		t.Fatalf("queued %d calls, not the parent's then the split's", len(q))
	}
	if inFlight {
		co.queue = q[1:]
		co.mu.Unlock()
		c.step(hk, q[:1])
	} else {
		co.mu.Unlock()
	}
	c.flush(hk)
	for range 2 {
		select {
		case <-dones:
		case <-ctx.Done():
			t.Fatal("the calls were not decided")
		}
	}
	if first[0].Err != nil || first[0].Remaining != iv.Capacity {
		t.Fatalf("%s: the peek sent first answered %+v, %v; want all %d tokens: the later call took before it", key, first[0].Result, first[0].Err, iv.Capacity)
	}
	if later[0].Err != nil || later[0].Limited || later[0].Remaining != iv.Capacity-1 {
		t.Fatalf("%s: the later call answered %+v, %v; want %d left", key, later[0].Result, later[0].Err, iv.Capacity-1)
	}
}
