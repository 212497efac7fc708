package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// With --read-from-replicas, a read whose replica is down goes to its
// slot's primary: the client gets its value, not a refused connection,
// for the seconds until the cluster drops the replica from its slot map
// (every read failed meanwhile). Both serving paths, each with a router
// of its own, which passes over a replica once it failed.
func TestReadsFromReplicasOutliveADeadReplica(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	const key = "{deadreplica}k"
	primary := primaryOf(t, c, key)
	replica := replicasOf(t, c, primary)[0]
	gets := func() int { return cmdCalls(replica, "get") }
	conns := onEachPath(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true})
	if got := conns[1].do("SET", key, "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	// The router learns the replicas from the slot map, which a replica
	// may join after the cluster formed; and a replica lags its primary.
	for _, rc := range conns {
		before := gets()
		waitUntil(t, "a GET reaches the replica, which has the write", func() bool {
			return rc.do("GET", key) == "$1\r\nv\r\n" && gets() > before
		})
	}
	replica.Kill()
	for loops, rc := range conns {
		for i := range 20 {
			if got := rc.do("GET", key); got != "$1\r\nv\r\n" {
				t.Fatalf("loops %d: GET %d with the replica dead: %q", loops, i, got)
			}
		}
	}
}
