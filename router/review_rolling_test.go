package router

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// A node's CLUSTER SLOTS can leave a slot out for a moment: during a
// CLUSTER FAILOVER FORCE a node that hears the old primary call itself a
// replica drops its slots until the new primary's claim arrives (Redis
// logs "Cluster state changed: fail" for some ms). A slot map read from
// that node sent the slot's commands nowhere: callers got "CLUSTERDOWN
// sluice has no slot map of the cluster yet" until the next reading,
// where a cluster client asking another node would have gone on. The
// slot is taken out of all nodes' views but its owner's (CLUSTER
// DELSLOTS there), so a reading that believes the first node it asks is
// wrong two times in three.
func TestReviewRollingReadSlotsPrefersAWholeMap(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), Share: 1, Timeout: 200 * time.Millisecond, TopologyInterval: time.Hour})
	// Nodes are in slot order: slot 0 is the first's.
	owner := cc.Nodes[0]
	for round := range 12 {
		for _, n := range cc.Nodes[1:] {
			// Gossip gives the slot back within a ping: delete it again
			// (an error if it is still unassigned).
			_ = n.Do(ctx, "CLUSTER", "DELSLOTS", "0").Error()
		}
		c.refreshTopology(ctx)
		s := c.topo.Load().owner(0)
		if s == nil {
			t.Fatalf("round %d: slot 0 has no owner in sluice's map; %s still serves it", round, owner.Addr)
		}
		if s.addr != owner.Addr {
			t.Fatalf("round %d: slot 0 on %s, want %s", round, s.addr, owner.Addr)
		}
	}
}
