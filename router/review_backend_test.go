package router

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A cluster user allowed only the buckets' keys (~sluice:*) decides
// every bucket, but the probe's EXISTS of sluice.probe:{tag} is answered
// NOPERM. That is the shard answering: after an outage it is healthy
// again, not left to the fallback until sluice restarts. Its heartbeat
// (sluice.instances) is refused too, which is said once in a warning:
// the instances are not counted.
func TestProbeAnsweredNOPERMIsHealthy(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1, Password: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if err := n.Do(ctx, "ACL", "SETUSER", "buckets", "on", ">pw", "~sluice:*", "+@all").Error(); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zap.WarnLevel)
	r := NewCluster(ClusterConfig{Seeds: c.Addrs(), Username: "buckets", Password: "pw", Timeout: 200 * time.Millisecond,
		ProbeInterval: 20 * time.Millisecond, HotThreshold: -1, Logger: zap.New(core)})
	t.Cleanup(r.Close)
	if err := r.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	iv, err := bucket.Limit{Capacity: 1000, Refill: 100, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	decide := func() Result {
		res := make([]Result, 1)
		r.Decide(context.Background(), []Request{{Key: "acl", Interval: iv, Cost: 1}}, res)
		return res[0]
	}
	if res := decide(); res.Err != nil || res.Source != SourceCluster {
		t.Fatalf("before the outage: %+v, want a decision of the cluster", res)
	}
	s := r.topo.Load().owner(slot.Of(KeyPrefix + "acl"))
	r.fault(s, errors.New("connection reset by peer"))
	for deadline := time.Now().Add(time.Second); !s.healthy.Load(); {
		if time.Now().After(deadline) {
			s.mu.Lock()
			last := s.lastErr
			s.mu.Unlock()
			t.Fatalf("the shard, answering its probes (%s), is still unhealthy", last)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if res := decide(); res.Err != nil || res.Source != SourceCluster {
		t.Fatalf("after the outage: %+v, want a decision of the cluster", res)
	}
	refused := func() int { return logs.FilterMessageSnippet("heartbeat refused").Len() }
	for deadline := time.Now().Add(5 * time.Second); refused() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no warning of the refused heartbeat")
		}
	}
	r.beat(ctx)
	r.beat(ctx)
	if n := refused(); n != 1 {
		t.Errorf("%d warnings of the refused heartbeat, want 1", n)
	}
}
