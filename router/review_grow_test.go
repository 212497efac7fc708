package router

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// A node taken out of the cluster (redis-cli --cluster del-node sends it
// CLUSTER RESET SOFT, it does not stop it) answers CLUSTER SLOTS with no
// slot at all, and stays among the cluster client's nodes until that
// client refreshes, which a healthy cluster never makes it do. A slot map
// read from it is not the cluster's: before, it replaced the map, every
// shard was forgotten, and until the next reading asked another node
// every ordinary command answered "CLUSTERDOWN sluice has no slot map"
// (seen every few seconds, for as long as the node ran, after del-node
// under load). rueidis skips such an answer for its own map too.
func TestReviewGrowRemovedNodeDoesNotEmptyTheSlotMap(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{})
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), Share: 1, TopologyInterval: 1 << 62})
	gone := cc.Nodes[len(cc.Nodes)-1] // a replica
	// A replica shows in CLUSTER SLOTS once its replication offset is not
	// 0: clustertest's clusters wait for that before they are handed over.
	// The cluster client learns the replicas at its first refresh after
	// they show in CLUSTER SLOTS: a MOVED makes it refresh.
	pollFor(t, 10*time.Second, "the replicas in CLUSTER SLOTS", func() bool {
		ranges, err := cc.Nodes[0].Do(ctx, "CLUSTER", "SLOTS").ToArray()
		if err != nil {
			return false
		}
		for _, rg := range ranges {
			if v, err := rg.ToArray(); err != nil || len(v) < 4 {
				return false
			}
		}
		return true
	})
	if err := cc.MoveSlot(ctx, 0, cc.Nodes[1]); err != nil {
		t.Fatal(err)
	}
	client := *c.client.Load()
	pollFor(t, 10*time.Second, "the replica among the cluster client's nodes", func() bool {
		client.Do(ctx, client.B().Get().Key("{"+c.tags[0]+"}").Build())
		_, ok := client.Nodes()[gone.Addr]
		return ok
	})
	if err := gone.Do(ctx, "CLUSTER", "RESET", "SOFT").Error(); err != nil {
		t.Fatal(err)
	}
	if slots, err := gone.Do(ctx, "CLUSTER", "SLOTS").ToArray(); err != nil || len(slots) != 0 {
		t.Fatalf("CLUSTER SLOTS of the reset node: %d ranges, %v; want none", len(slots), err)
	}
	// Each reading asks the nodes in a random order: 40 readings ask the
	// reset node first with a probability of 1 - (5/6)^40, over 99.9%.
	for i := range 40 {
		c.refreshTopology(ctx)
		if n := len(c.topo.Load().primaries); n != 3 {
			t.Fatalf("reading %d: the slot map has %d primaries, want 3", i, n)
		}
	}
}
