package router_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A cluster with cluster-preferred-endpoint-type unknown-endpoint gives
// its nodes' endpoints in CLUSTER SLOTS as null: each is reached at the
// host the slot map came from, on its own port, as cluster clients reach
// it. sluice's shards are the nodes' addresses, not ":port", which dials
// this host whatever host the nodes are on.
func TestUnknownEndpointIsTheAnsweringHost(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if err := n.Do(ctx, "CONFIG", "SET", "cluster-preferred-endpoint-type", "unknown-endpoint").Error(); err != nil {
			t.Fatal(err)
		}
	}
	slots, err := c.Nodes[0].Do(ctx, "CLUSTER", "SLOTS").ToArray()
	if err != nil || len(slots) == 0 {
		t.Fatalf("CLUSTER SLOTS: %v, %v", slots, err)
	}
	if node, _ := slots[0].ToArray(); len(node) < 3 {
		t.Fatalf("CLUSTER SLOTS range: %v", node)
	} else if ep, _ := node[2].ToArray(); len(ep) < 1 || !ep[0].IsNil() {
		t.Fatalf("the node's endpoint is not null: %v", ep)
	}
	want := c.Addrs()
	slices.Sort(want)
	r := newRouter(t, c.Addrs(), router.ClusterConfig{})
	waitConnected(t, r)
	var got []string
	waitFor(t, 10*time.Second, "shards at the nodes' addresses", func() bool {
		got = got[:0]
		for _, s := range r.Stats().Cluster.Shards {
			got = append(got, s.Addr)
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	})
	if g := forward(t, r, "SET", "ue:k", "v"); g != "+OK\r\n" {
		t.Errorf("SET: %q", g)
	}
}
