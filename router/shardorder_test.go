package router

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// Two calls on one key of one token, submitted one after the other
// without a loop's pipes (the goroutine path, or a loop with
// --cluster-tls), the first taken into a pipeline whose goroutine has
// not sent it yet: the pipeline a second goroutine takes must not carry
// the second call, which would then run first on rueidis's connection
// (the second allowed, the first denied). It waits until the first's
// pipeline is answered.
func TestShardQueueKeepsAKeysOrder(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), Timeout: time.Second, HotThreshold: -1})
	key := "order." + t.Name() + time.Now().Format("150405.000000")
	iv, err := bucket.Limit{Capacity: 1, Refill: 1, Period: 3600_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	s := c.topo.Load().ownerOf(KeyPrefix + key)
	q := &s.out
	submit := func() (*Result, *atomic.Bool) {
		res, done := make([]Result, 1), new(atomic.Bool)
		c.Submit(ctx, []Request{{Op: Take, Key: key, Interval: iv, Cost: 1}}, res, func([]int) { done.Store(true) })
		return &res[0], done
	}
	// The first call is queued with no goroutine started for it, then
	// taken as the first goroutine takes it, which stalls before sending.
	q.mu.Lock()
	q.flushing = maxFlushes
	q.mu.Unlock()
	first, firstDone := submit()
	q.mu.Lock()
	calls, groups := q.next()
	q.flushing = 1 // the stalled one
	q.mu.Unlock()
	if len(calls) != 1 {
		t.Fatalf("the first pipeline took %d calls, want 1", len(calls))
	}
	// The second starts a goroutine of its own.
	second, secondDone := submit()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		q.mu.Lock()
		n := q.flushing
		q.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second call's goroutine did not end")
		}
	}
	if secondDone.Load() {
		t.Errorf("the second call was decided while the first waited to be sent: %+v", *second)
	}
	// The stalled goroutine sends, then goes on with the queue.
	c.flushCalls(s, calls, groups)
	q.mu.Lock()
	q.sent(calls)
	q.mu.Unlock()
	c.flushShard(s)
	if !firstDone.Load() || !secondDone.Load() {
		t.Fatalf("decided: first %v, second %v; want both", firstDone.Load(), secondDone.Load())
	}
	if first.Err != nil || second.Err != nil || first.Limited || !second.Limited {
		t.Errorf("first %+v, second %+v; want allowed, then limited", *first, *second)
	}
}
