package router

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// A hung primary (SIGSTOP: its socket open, never answering) costs a
// slot map reading at most one call timeout, not the reading's whole
// deadline: the next node is asked. Once the primary is known unhealthy
// it is asked last, so the readings of an outage, one on every tick of
// the loop that also probes, renews hot keys and beats, do not wait on
// it at all. Before, a reading that picked it first waited out
// 4 × Timeout + 100ms and failed without asking the others, and a slot
// moved meanwhile went unnoticed.
func TestReviewReadSlotsHungNodeCostsOneTimeout(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	const timeout = 200 * time.Millisecond
	// No heartbeat (Share), no periodic reading, no tick of the loop
	// after its first (ProbeInterval): nothing but this test reads the
	// slot map or calls the hung primary. (Ticking, the loop read the map
	// and probed the primary marked down below beside the test's reads:
	// a data race the race detector caught once in a full run.)
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), Share: 1, Timeout: timeout, TopologyInterval: time.Hour, ProbeInterval: time.Hour})
	// Nodes are in slot order: slots 9000 and on are the second's.
	victim, b := cc.Nodes[0], cc.Nodes[2]
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	// Each round moves a slot of the second primary to the third:
	// a new slot each time, as one moved back and forth was seen to be
	// refused by its owner while the cluster's epochs settled.
	round := 0
	read := func(limit time.Duration) time.Duration {
		t.Helper()
		sl := 9000 + round
		round++
		if err := cc.MoveSlot(ctx, sl, b); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.refreshTopology(ctx)
		took := time.Since(start)
		if took > limit {
			t.Fatalf("round %d: a slot map reading took %v with a hung primary, want at most %v", round, took, limit)
		}
		if got := c.topo.Load().owner(sl).addr; got != b.Addr {
			t.Fatalf("round %d: slot %d moved to %s, the reading has it on %s", round, sl, b.Addr, got)
		}
		return took
	}
	// Rounds until the hung primary was asked first once (a reading that
	// took most of a timeout); a third of the readings ask it first.
	for slow := 0; slow < 1 && round < 16; {
		if read(2*timeout) > timeout/2 {
			slow++
		}
	}
	c.mu.Lock()
	s := c.shards[victim.Addr]
	c.mu.Unlock()
	c.fault(s, errors.New("test: hung"))
	for range 6 {
		read(timeout / 2)
	}
}
