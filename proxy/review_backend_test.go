package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// With --read-from-replicas, a read whose replica answers but cannot
// serve it (MASTERDOWN: its link to the primary is down and
// replica-serve-stale-data is no; LOADING alike) goes to the slot's
// primary, which holds the value, as a read whose replica cannot be
// reached does; the client is not answered the replica's refusal for as
// long as its link stays down.
func TestReadsFromReplicasPassOverAReplicaThatCannotServe(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	ctx := context.Background()
	const key = "{staleless}k"
	primary := primaryOf(t, c, key)
	replica := replicasOf(t, c, primary)[0]
	conns := onEachPath(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true, TopologyInterval: 20 * time.Millisecond})
	if got := conns[1].do("SET", key, "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	gets := func() int {
		stats, _ := replica.Do(ctx, "INFO", "commandstats").ToString()
		_, after, ok := strings.Cut(stats, "cmdstat_get:calls=")
		if !ok {
			return 0
		}
		n, _ := strconv.Atoi(after[:strings.IndexByte(after, ',')])
		return n
	}
	for _, rc := range conns {
		before := gets()
		waitUntil(t, "a GET reaches the replica, which has the write", func() bool {
			return rc.do("GET", key) == "$1\r\nv\r\n" && gets() > before
		})
	}
	// The replica cannot authenticate to its primary again once its link
	// is cut: the link stays down.
	for _, args := range [][]string{{"replica-serve-stale-data", "no"}, {"masteruser", "nobody"}, {"masterauth", "wrong"}} {
		if err := replica.Do(ctx, "CONFIG", "SET", args[0], args[1]).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := primary.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Error(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the replica's link to its primary is down", func() bool {
		info, _ := replica.Do(ctx, "INFO", "replication").ToString()
		return strings.Contains(info, "master_link_status:down")
	})
	for loops, rc := range conns {
		for i := range 5 {
			if got := rc.do("GET", key); got != "$1\r\nv\r\n" {
				t.Fatalf("loops %d: GET %d with the replica's link down: %q", loops, i, got)
			}
		}
	}
}
