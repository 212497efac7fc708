package router

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// A slot map that moves a slot (a replica promoted) has the unhealthy
// shards probed one first backoff after their last probe, at once after
// an outage's grown backoffs. A cluster that lost
// a primary answers CLUSTERDOWN for every key, so every shard is marked;
// their probes had backed off to 8 intervals (800 ms by default) by the
// time the promoted replica made the cluster whole, and the healthy
// shards stayed in fallback up to 1.5 s longer than the victim's.
func TestSlotMapChangeProbesUnhealthyShardsNow(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	// A probe interval of an hour: nothing probes but this test.
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), Share: 1, ProbeInterval: time.Hour, TopologyInterval: time.Hour})
	a, b := cc.Nodes[0], cc.Nodes[2]
	c.mu.Lock()
	s := c.shards[a.Addr]
	c.mu.Unlock()
	c.fault(s, errors.New("test: CLUSTERDOWN The cluster is down"))
	s.mu.Lock()
	// As after an outage's failed probes, the last an interval ago.
	s.backoff = 8 * c.cfg.ProbeInterval
	s.nextProbe = time.Now().Add(-c.cfg.ProbeInterval).Add(s.backoff)
	s.mu.Unlock()

	c.refreshTopology(ctx) // the same map: nothing moved
	s.mu.Lock()
	due := !time.Now().Before(s.nextProbe)
	s.mu.Unlock()
	if due {
		t.Fatal("probed at once though no slot moved")
	}

	// Slots 9000 and on are the second primary's: one goes to the third.
	if err := cc.MoveSlot(ctx, 9000, b); err != nil {
		t.Fatal(err)
	}
	c.refreshTopology(ctx)
	if got := c.topo.Load().owner(9000).addr; got != b.Addr {
		t.Fatalf("slot 9000 read on %s, moved to %s", got, b.Addr)
	}
	s.mu.Lock()
	due, backoff := !time.Now().Before(s.nextProbe), s.backoff
	s.mu.Unlock()
	if !due || backoff != c.cfg.ProbeInterval {
		t.Fatalf("after a slot moved: probe due %v, backoff %v; want due, %v", due, backoff, c.cfg.ProbeInterval)
	}
	c.probe(ctx, time.Now())
	if !s.healthy.Load() {
		t.Fatal("the shard, answering, is still unhealthy after its probe")
	}

	// A shard probed just now is not probed again at once when the map
	// changes again (a resharding changes it at every reading): one
	// interval after its probe.
	c.fault(s, errors.New("test: CLUSTERDOWN The cluster is down"))
	if err := cc.MoveSlot(ctx, 9001, b); err != nil {
		t.Fatal(err)
	}
	c.refreshTopology(ctx)
	s.mu.Lock()
	due = !time.Now().Before(s.nextProbe)
	s.mu.Unlock()
	if due {
		t.Fatal("a shard marked just now is probed at once on a map change")
	}
}
