package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// With --read-from-replicas, a read its replica cannot answer goes to the
// primary, as README says, on both serving paths:
//   - a hung (paused) replica's read, past the forward timeout: on the
//     event loops the read kept the time it was sent to the replica, so
//     the primary's connection took it as hung at once, failed it (and
//     every other command waiting there) and named the primary;
//   - a keyless read (EVAL_RO with no keys) whose replica is dead: it
//     was answered the refused connection, not sent to a primary.
func TestReviewReplicasReadAgainOnThePrimary(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	ctx := context.Background()
	conns := map[int]*rawConn{}
	for _, loops := range []int{1, -1} {
		// Not much shorter: a healthy node's reply, to the read sent again
		// as to any other command here, must come within it on a loaded
		// machine. A read that keeps its replica's time fails at once
		// whatever its length.
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true, ForwardTimeout: time.Second, HotThreshold: -1})
		waitRouter(t, r)
		conns[loops] = dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
	}
	calls := func(n *clustertest.Node, cmd string) int {
		stats, _ := n.Do(ctx, "INFO", "commandstats").ToString()
		_, after, ok := strings.Cut(stats, "cmdstat_"+cmd+":calls=")
		if !ok {
			return 0
		}
		v, _ := strconv.Atoi(after[:strings.IndexByte(after, ',')])
		return v
	}
	// A key of each primary, written: CLUSTER SLOTS leaves out a replica
	// that has replicated nothing yet, and the routers learn replicas
	// from it.
	var replicas []*clustertest.Node
	var key string // the first replica's primary's
	keys := map[*clustertest.Node]string{}
	for i := 0; len(keys) < len(c.Nodes)/2; i++ {
		key := "{reviewreplicas" + strconv.Itoa(i) + "}k"
		if p := primaryOf(t, c, key); keys[p] == "" {
			keys[p] = key
			if got := conns[1].do("SET", key, "v"); got != "+OK\r\n" {
				t.Fatalf("SET: %q", got)
			}
		}
	}
	for _, n := range c.Nodes[len(c.Nodes)/2:] {
		replicas = append(replicas, n)
		info, _ := n.Do(ctx, "INFO", "replication").ToString()
		for p, k := range keys {
			if _, port, _ := strings.Cut(p.Addr, ":"); !strings.Contains(info, "master_port:"+port+"\r\n") {
				continue
			}
			if len(replicas) == 1 {
				key = k
			}
			for _, rc := range conns {
				before := calls(n, "get")
				waitUntil(t, "a GET reaches the replica, which has the write", func() bool {
					return rc.do("GET", k) == "$1\r\nv\r\n" && calls(n, "get") > before
				})
			}
		}
	}

	replica := replicas[0]
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	// Both paths at once: each waits out the forward timeout.
	for _, rc := range conns {
		rc.send([]string{"GET", key})
	}
	for loops, rc := range conns {
		if got := rc.read(); got != "$1\r\nv\r\n" {
			t.Errorf("loops %d: GET with the replica hung: %q", loops, got)
		}
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}

	for _, n := range replicas {
		n.Kill()
	}
	for loops, rc := range conns {
		for i := range 6 {
			if got := rc.do("EVAL_RO", "return 1", "0"); got != ":1\r\n" {
				t.Errorf("loops %d: keyless EVAL_RO %d with the replicas dead: %q", loops, i, got)
			}
		}
	}
}
