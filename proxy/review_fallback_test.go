package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A RESP3 client's command to a paused primary, on the goroutine path,
// before sluice has a connection to that node: the new connection's
// HELLO 3 meets the hung node. The command is answered the error within
// --forward-timeout, as on the event loops, not after the handshake's own
// second.
func TestForwardToHungNodeDialBoundedByForwardTimeout(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	victim := c.Nodes[0]
	key := nameOn(t, c, victim, "k")
	const forward = 200 * time.Millisecond
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), ForwardTimeout: forward, HotThreshold: -1})
	cl := goredis.NewClient(&goredis.Options{Addr: serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: -1}), Protocol: 3, MaxRetries: -1})
	t.Cleanup(func() { cl.Close() })
	if err := cl.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	start := time.Now()
	err := cl.Get(ctx, key).Err()
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "sluice: connection to "+victim.Addr+" failed") {
		t.Fatalf("GET on the paused primary: %v, want sluice's connection error", err)
	}
	if took > 2*forward {
		t.Fatalf("GET on the paused primary answered after %v, want within --forward-timeout (%v)", took, forward)
	}
}

// The same for a RESP3 subscriber's shard channel on the paused primary:
// its new connection's handshake is bounded by --forward-timeout too, on
// both paths.
func TestSubscribeToHungNodeDialBoundedByForwardTimeout(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	victim := c.Nodes[0]
	ch := nameOn(t, c, victim, "ch")
	const forward = 200 * time.Millisecond
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), ForwardTimeout: forward, HotThreshold: -1})
	var cls []*goredis.Client
	for _, loops := range []int{0, -1} {
		cl := goredis.NewClient(&goredis.Options{Addr: serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}), Protocol: 3, MaxRetries: -1})
		t.Cleanup(func() { cl.Close() })
		if err := cl.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		cls = append(cls, cl)
	}
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	for i, cl := range cls {
		start := time.Now()
		ps := cl.SSubscribe(ctx, ch)
		_, err := ps.Receive(ctx)
		took := time.Since(start)
		ps.Close()
		if err == nil {
			t.Fatalf("path %d: SSUBSCRIBE on the paused primary confirmed", i)
		}
		if took > 2*forward {
			t.Fatalf("path %d: SSUBSCRIBE on the paused primary answered %v after %v, want within --forward-timeout (%v)", i, err, took, forward)
		}
	}
}
