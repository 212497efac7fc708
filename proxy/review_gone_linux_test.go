package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A node removed from the cluster but left running (redis-cli --cluster
// del-node: forgotten by the others, reset) is no longer in the slot map:
// sluice's idle connections to it, an event loop's and the router's, are
// closed, while reads go on to the nodes still in the map. Here a replica,
// whose removal moves no slot (the map's generation stays the same).
func TestConnectionsToARemovedNodeAreClosed(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	ctx := context.Background()
	const key = "{gone}k"
	primary := primaryOf(t, c, key)
	replica := replicasOf(t, c, primary)[0]
	// sluice's forwarding connections are those whose last command was a
	// GET: the routers' cluster clients and clustertest's send none.
	forwarding := func() int {
		list, err := replica.Do(ctx, "CLIENT", "LIST").ToString()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(list, " cmd=get ")
	}
	conns := onEachPath(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true})
	if got := conns[1].do("SET", key, "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	for loops, rc := range conns {
		before := forwarding()
		waitUntil(t, "a GET reaches the replica", func() bool {
			return rc.do("GET", key) == "$1\r\nv\r\n" && forwarding() > before
		})
		t.Logf("loops %d: %d forwarding connections to the replica", loops, forwarding())
	}

	id, err := replica.Do(ctx, "CLUSTER", "MYID").ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if n != replica {
			if err := n.Do(ctx, "CLUSTER", "FORGET", id).Error(); err != nil {
				t.Fatalf("CLUSTER FORGET on %s: %v", n.Addr, err)
			}
		}
	}
	if err := replica.Do(ctx, "CLUSTER", "RESET").Error(); err != nil {
		t.Fatalf("CLUSTER RESET: %v", err)
	}

	waitUntil(t, "sluice's connections to the removed node are closed", func() bool {
		for _, rc := range conns {
			if rc.do("GET", key) != "$1\r\nv\r\n" {
				return false
			}
		}
		return forwarding() == 0
	})
	for loops, rc := range conns {
		if got := rc.do("GET", key); got != "$1\r\nv\r\n" {
			t.Fatalf("loops %d: GET after the removal: %q", loops, got)
		}
	}
}
