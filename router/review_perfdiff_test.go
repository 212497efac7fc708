package router

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/slot"
)

// A cluster whose nodes own no slot yet (created, not yet given slots)
// answers CLUSTER SLOTS with an empty array, and readSlots believes it:
// the slot map read from it has no owner at all. Before, the map's table
// of shards was then empty, and the first slot looked up in it (splitting
// the hash tags, before the map was even stored) indexed past its end:
// sluice panicked as it connected to such a cluster. Now a slot without
// an owner is nil whether or not any slot has one, and sluice serves with
// the empty map, its decisions the fallback's.
func TestReviewPerfdiffEmptySlotMap(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	node := diff29Node(t, "--cluster-enabled", "yes")
	c := NewCluster(ClusterConfig{Seeds: []string{node.addr}, HotThreshold: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	topo := c.topo.Load()
	for sl := range slot.Count {
		if s := topo.owner(sl); s != nil {
			t.Fatalf("slot %d owned by %s in an empty map", sl, s.addr)
		}
	}
	if got := c.Primaries(); len(got) != 0 {
		t.Errorf("Primaries of an empty map: %v", got)
	}
	if !c.ownersHealthy() {
		t.Error("an empty map has an unhealthy owner")
	}
	// Read again (the loop does, at every period), and a decision.
	c.refreshTopology(ctx)
	res := make([]Result, 1)
	c.Decide(ctx, []Request{{Key: "k", Interval: bucket.Interval{Capacity: 10, U: 1, V: 1}, Cost: 1}}, res)
	if res[0].Source != SourceLocal || res[0].Err != nil || res[0].Limited {
		t.Errorf("decided %+v, want allowed by the local fallback", res[0])
	}
}
