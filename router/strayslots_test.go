package router

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// The cluster client keeps a node taken out of the cluster among its
// nodes until its own next refresh; by then its address may be another
// cluster's node, whose whole slot map is no less whole than this
// cluster's. The map is read from the nodes the last map named first, so
// that such a stray is asked only when none of them answers: before, the
// nodes were asked in the map's random order, and a quarter of the
// readings here took the other cluster's map.
func TestSlotsAreReadFromTheNodesTheMapNamedFirst(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	stray := diff29Node(t, "--cluster-enabled", "yes")
	if err := stray.client.Do(t.Context(), stray.client.B().ClusterAddslotsrange().StartSlotEndSlot().StartSlotEndSlot(0, 16383).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]rueidis.Client{stray.addr: stray.client}
	for _, addr := range c.Addrs() {
		cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true, DisableRetry: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		nodes[addr] = cl
	}
	named := func(addr string) bool { return slices.Contains(c.Addrs(), addr) }
	for i := range 20 { // the stray first with a probability of 1/4 each, before
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		ranges, from, err := readSlots(ctx, stray.client, nodes, named, nil, time.Second)
		cancel()
		if err != nil || from == stray.addr || slotsCovered(ranges) != 16384 {
			t.Fatalf("reading %d: %d slots from %s (the stray is %s), %v; want the cluster's whole map", i, slotsCovered(ranges), from, stray.addr, err)
		}
	}
	// None of the named nodes answers: the others are asked (a cluster
	// restarted whole at new addresses is found this way).
	gone := func(string) bool { return false }
	ranges, from, err := readSlots(t.Context(), stray.client, map[string]rueidis.Client{stray.addr: stray.client}, gone, nil, time.Second)
	if err != nil || from != stray.addr || slotsCovered(ranges) != 16384 {
		t.Errorf("with no named node: %d slots from %s, %v; want the only node's map", slotsCovered(ranges), from, err)
	}
}
