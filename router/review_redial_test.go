package router

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// rueidis holds a call to a node it is redialing until that dial ends,
// whatever the call's deadline: a hung node (its socket accepts, nothing
// answers) is redialed in the background, on rueidis's own 1s dial
// timeout, again after each failure. The probe of that node must still
// give up at the backend timeout: the loop that runs it also probes the
// other shards, reads the slot map (a promoted replica) and beats.
func TestReviewRedialProbeKeepsTheBackendTimeout(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	const timeout = 100 * time.Millisecond
	// The background loop connects, then waits an hour for its next
	// pass: the probes below are the only ones, and nothing reads the
	// slot map (s.probe) while they run.
	r := NewCluster(ClusterConfig{Seeds: c.Addrs(), Timeout: timeout, ProbeInterval: time.Hour})
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	hung, err := c.Primary(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	key := ""
	for i := 0; key == ""; i++ {
		if k := "redial:" + strconv.Itoa(i); slot.Of(KeyPrefix+k) <= 5460 {
			key = k
		}
	}
	iv, err := bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	if err := hung.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hung.Resume() })
	var s *shard
	for deadline := time.Now().Add(5 * time.Second); s == nil || s.healthy.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hung primary's shard was not found unhealthy within 5s")
		}
		r.mu.Lock()
		s = r.shards[hung.Addr]
		r.mu.Unlock()
		res := make([]Result, 1)
		r.submitAndWait(ctx, []Request{{Key: key, Interval: iv, Cost: 1}}, res)
	}
	// Bounded: 2.5s of probes, each due at once: rueidis redials after a random
	// delay of up to 1s.
	for start := time.Now(); time.Since(start) < 2500*time.Millisecond; {
		s.mu.Lock()
		s.nextProbe = time.Time{}
		s.mu.Unlock()
		t0 := time.Now()
		r.probe(ctx, t0)
		if d := time.Since(t0); d > timeout+150*time.Millisecond {
			t.Fatalf("a probe of the hung primary took %v, %v into the probes; want about the %v backend timeout", d, t0.Sub(start), timeout)
		}
		if s.healthy.Load() {
			t.Fatal("the hung primary's shard was found healthy")
		}
	}
}
