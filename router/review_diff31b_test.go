package router

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// Close waits for the goroutine that asks the nodes subscribers' tunnels
// hold, and the slot map no longer names, whether they left the cluster.
// Those nodes may not answer (paused, or cut off by a partition that left
// the tunnels' connections open): each costs a dial and a read of up to a
// second, and the goroutine asked them one after the other whatever
// Close said, holding sluice's exit past --shutdown-timeout by a second
// for each.
func TestReviewDiff31bCloseDoesNotWaitForTheLeftNodesSweep(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	c := NewCluster(ClusterConfig{Seeds: cc.Addrs(), TopologyInterval: 20 * time.Millisecond})
	var closeOnce sync.Once
	closeC := func() { closeOnce.Do(c.Close) }
	t.Cleanup(closeC)
	ctx := t.Context()
	if err := c.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}

	// Nodes that take connections and never answer, which the map names
	// nowhere.
	var accepted atomic.Int64
	var held []net.Conn
	var heldMu sync.Mutex
	t.Cleanup(func() {
		heldMu.Lock()
		defer heldMu.Unlock()
		for _, conn := range held {
			conn.Close()
		}
	})
	tun := c.Tunnel(false, func([]byte, bool, bool) {}, func(error) {})
	t.Cleanup(tun.Close)
	for range 3 {
		tunnelTo(t, tun, serveEach(t, func(conn net.Conn) {
			accepted.Add(1)
			heldMu.Lock()
			held = append(held, conn)
			heldMu.Unlock()
		}))
	}
	// The tunnel's own 3 connections, then the sweep's first question.
	pollFor(t, 10*time.Second, "the nodes absent from the slot map asked whether they left", func() bool { return accepted.Load() >= 4 })
	start := time.Now()
	closeC()
	if took := time.Since(start); took > 700*time.Millisecond {
		t.Fatalf("Close took %v, waiting for the sweep of nodes that do not answer", took)
	}
}
