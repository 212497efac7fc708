package router

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A batch's calls free to go to any sub-bucket go to one, whatever
// reading of the split each holds: a call answered "split" by the key's
// own bucket stores a reading of its own, and readings told apart sent
// the calls of one batch round-robin over the sub-buckets, a peek after a
// take on another sub-bucket than the take (and, on an event loop's
// pipes, settled before it): the peek answered the bucket full
// (PATHS_LIMITS=1, seed 1015 under -race: 3000 with no reset time, 3
// tokens taken before it on the other path).
func TestReadingsOfOneSplitShareABatch(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), HotKeys: []string{"*:hot"}, Share: 1})
	key := "peeksplit2:hot"
	iv, err := bucket.Limit{Capacity: 3000, Refill: 1, Period: 3600_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	peek := []Request{{Op: Take, Key: key, Interval: iv, Cost: 0}}
	c.Decide(ctx, peek, make([]Result, 1))
	hk := (*c.hot.keys.Load())[key]
	// Split here rather than waiting for the background work, which
	// leaves the split alone from then on.
	for {
		if hk.renewing.CompareAndSwap(false, true) {
			if hk.split.Load() != nil {
				break
			}
			c.renew(ctx, hk) // lets go of renewing
		}
		if ctx.Err() != nil {
			t.Fatal("the key was not split")
		}
		time.Sleep(time.Millisecond)
	}
	st := hk.split.Load()
	other := *st // another reading of the split, as a call answered "split" stores
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
	dones := make(chan struct{}, 3)
	done := func([]int) { dones <- struct{}{} }
	res := make([]Result, 3)
	c.Submit(ctx, peek, res[0:1], done)
	hk.split.Store(&other)
	c.Submit(ctx, []Request{{Op: Take, Key: key, Interval: iv, Cost: 2}}, res[1:2], done)
	hk.split.Store(st)
	c.Submit(ctx, peek, res[2:3], done)
	c.flush(hk)
	for range 3 {
		select {
		case <-dones:
		case <-ctx.Done():
			t.Fatal("the calls were not decided")
		}
	}
	if res[1].Err != nil || res[1].Limited {
		t.Fatalf("the take answered %+v, %v", res[1].Result, res[1].Err)
	}
	if p := res[2]; p.Err != nil || p.Remaining >= iv.Capacity || p.ResetAfter <= 0 {
		t.Fatalf("the peek after a take of 2 answered %+v, %v: the bucket full", p.Result, p.Err)
	}
}
