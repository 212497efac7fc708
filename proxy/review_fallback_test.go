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

// A paused primary, before sluice has a connection to it: a new
// connection's HELLO 3 meets the hung node. A RESP3 client's command is
// answered CLUSTERDOWN within --forward-timeout on both paths, not after
// the handshake's own second; and so is a
// RESP3 subscriber's shard channel, on both paths.
func TestHungNodeDialBoundedByForwardTimeout(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	victim := c.Nodes[0]
	key, ch := nameOn(t, c, victim, "k"), nameOn(t, c, victim, "ch")
	const forward = 200 * time.Millisecond
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), ForwardTimeout: forward, HotThreshold: -1})
	cls := pathClients(t, ctx, r, goredis.Options{Protocol: 3, MaxRetries: -1})
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	for i, cl := range cls {
		start := time.Now()
		err := cl.Get(ctx, key).Err()
		took := time.Since(start)
		// Nothing was written to the node (its connection was not made),
		// so CLUSTERDOWN: cluster clients retry it, as they retry a node
		// that does not answer them.
		if err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN sluice: connection to "+victim.Addr+" failed") {
			t.Fatalf("path %d: GET on the paused primary: %v, want sluice's CLUSTERDOWN", i, err)
		}
		if took > 2*forward {
			t.Fatalf("path %d: GET on the paused primary answered after %v, want within --forward-timeout (%v)", i, took, forward)
		}
	}
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

// pathClients is a go-redis client of a sluice forwarding to r on the
// event loops, then one on goroutines, each with opt and answering PING.
func pathClients(t *testing.T, ctx context.Context, r *router.Cluster, opt goredis.Options) []*goredis.Client {
	t.Helper()
	var cls []*goredis.Client
	for _, loops := range []int{0, -1} {
		o := opt
		o.Addr = serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		cl := goredis.NewClient(&o)
		t.Cleanup(func() { cl.Close() })
		if err := cl.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		cls = append(cls, cl)
	}
	return cls
}
