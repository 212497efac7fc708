package router

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A new connection that times out connecting (the forwarding and
// blocking paths' dial, bounded by its own second or --forward-timeout)
// is not a call past the backend timeout: the shard's error names the
// dial and its address, not "no reply within the timeout (50ms)". Go's
// dial timeout matches context.DeadlineExceeded under errors.Is.
func TestDialTimeoutFaultKeepsItsError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, derr := (&net.Dialer{Deadline: time.Now().Add(-time.Second)}).Dial("tcp", addr)
	if derr == nil {
		t.Fatal("a dial past its deadline connected")
	}
	s := &shard{addr: addr}
	s.healthy.Store(true)
	c := &Cluster{cfg: ClusterConfig{Timeout: 50 * time.Millisecond}, log: zap.NewNop(), ctx: context.Background(),
		shards: map[string]*shard{addr: s}}
	c.unreachable(addr, derr)
	if s.healthy.Load() || s.lastErr != derr.Error() || s.kinds["timeout"] != 1 {
		t.Fatalf("after a dial timeout: healthy %v, last error %q, kinds %v; want unhealthy, %q, one timeout",
			s.healthy.Load(), s.lastErr, s.kinds, derr.Error())
	}
}

// A hung shard's error, in its log line and INFO, says what happened in
// an operator's words, as the loops say it, on the goroutine path too:
// not Go's "context deadline exceeded". Its probe, unanswered within the
// backend timeout, is the same fault as the call that marked it: the
// last error goes on saying so from the first probe on (100 ms later).
func TestHungShardProbeErrorSaysNoReply(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	// No tick of the loop after its first (ProbeInterval): the probe is
	// the test's, not the loop's beside it (with a shard down the loop
	// reads the slot map at each tick, writing what a probe reads).
	r := NewCluster(ClusterConfig{Seeds: c.Addrs(), Timeout: 100 * time.Millisecond, HotThreshold: -1, Logger: zap.NewNop(), ProbeInterval: time.Hour})
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	iv, err := bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[0].Pause(); err != nil {
		t.Fatal(err)
	}
	defer c.Nodes[0].Resume()
	r.Decide(ctx, []Request{{Key: "hung", Interval: iv, Cost: 1}}, make([]Result, 1))
	s := r.topo.Load().ownerOf(KeyPrefix + "hung")
	if s == nil || s.healthy.Load() {
		t.Fatal("the paused shard is not unhealthy")
	}
	s.mu.Lock()
	last := s.lastErr
	s.mu.Unlock()
	if !strings.Contains(last, "no reply within the timeout") {
		t.Fatalf("the call that found the shard hung left its last error %q, want no reply within the timeout", last)
	}
	r.probe(ctx, time.Now().Add(time.Hour))
	s.mu.Lock()
	last = s.lastErr
	s.mu.Unlock()
	if !strings.Contains(last, "no reply within the timeout") {
		t.Fatalf("after a probe of the paused shard its last error is %q, want no reply within the timeout", last)
	}
}
