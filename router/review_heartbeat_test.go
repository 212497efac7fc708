package router_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// An instance that stops (a rolling restart) is no longer counted by the
// heartbeat: one started just after it counts only those still running,
// and its fallback grants their share of each limit, not a smaller one
// for a peer that is gone. The one left running keeps its announcement.
func TestReviewHeartbeatClosedInstanceNotCounted(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	a := newRouter(t, c.Addrs(), router.ClusterConfig{})
	b := newRouter(t, c.Addrs(), router.ClusterConfig{})
	waitConnected(t, a)
	waitConnected(t, b)
	announced := func() int64 {
		n, _ := cl.Do(ctx, cl.B().Zcard().Key("sluice.instances").Build()).AsInt64()
		return n
	}
	// A first beat held past its deadline (500 ms) by a loaded machine is
	// tried again a second later: the waits below allow for a few.
	waitFor(t, 5*time.Second, "both announced", func() bool { return announced() == 2 })
	b.Close()
	if n := announced(); n != 1 {
		t.Fatalf("%d instances announced after one of two closed, want 1", n)
	}
	d := newRouter(t, c.Addrs(), router.ClusterConfig{})
	waitConnected(t, d)
	waitFor(t, 5*time.Second, "d's first beat", func() bool { return d.Instances() > 1 })
	if n, share := d.Instances(), stats(d).Share; n != 2 || share != 0.5 {
		t.Fatalf("an instance started after one of two closed counts %d instances, share %v; want 2, 0.5", n, share)
	}
}

// Close leaves the heartbeat on a deadline: a cluster that no longer
// answers does not hold it.
func TestReviewHeartbeatCloseBoundedWhenClusterStalls(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	held, err := c.Primary(t.Context(), slot.Of("sluice.instances"))
	if err != nil {
		t.Fatal(err)
	}
	// The beat's deadline, which Close's is, is 4 x Timeout + 100ms.
	a := newRouter(t, c.Addrs(), router.ClusterConfig{Timeout: 25 * time.Millisecond})
	waitConnected(t, a)
	// A first beat held past its deadline (200 ms here) by a loaded
	// machine is tried again a second later: wait for a few.
	waitFor(t, 5*time.Second, "a's first beat", func() bool {
		v, err := held.Do(t.Context(), "ZCARD", "sluice.instances").AsInt64()
		return err == nil && v == 1
	})
	if err := held.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Resume() })
	start := time.Now()
	a.Close()
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close took %v with the cluster stalled", took)
	}
}
