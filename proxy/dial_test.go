package proxy_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// An event loop that connects to a primary for the first time while the
// primary hangs gives up within the backend timeout, as it would on a
// call the primary held: the calls that waited for the connection are
// decided by the fallback, not held for the dial's own second.
func TestBucketConnectionToAHungPrimaryIsBoundedByTheTimeout(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: 100 * time.Millisecond, HotThreshold: -1})
	cl := goredis.NewClient(&goredis.Options{Addr: serveConfig(t, proxy.Config{Decider: r}), MaxRetries: -1, ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { cl.Close() })
	key := "dial:hung"
	n := primaryOf(t, c, router.KeyPrefix+key)
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Resume() })
	start := time.Now()
	v, err := cl.Do(context.Background(), "THROTTLE", key, 10, 1, "1m").Int64Slice()
	if err != nil || v[0] != 0 {
		t.Fatalf("THROTTLE while its primary hangs: %v, %v; want allowed by the fallback", v, err)
	}
	// Held for the dial, it is answered a second (the dial's bound) or more
	// after it was sent: any time under that is the backend timeout's and
	// the machine's, which a loaded one stretches.
	if took := time.Since(start); took >= time.Second {
		t.Fatalf("THROTTLE while its primary hangs answered after %v, want within the backend timeout, not the dial's second", took)
	}
	st := r.Stats().Cluster
	if st.Decisions[router.SourceLocal] != 1 {
		t.Fatalf("decisions %v, want the one by the local fallback", st.Decisions)
	}
	for _, sh := range st.Shards {
		if sh.Addr == n.Addr && sh.Healthy {
			t.Fatalf("%s hung at the loop's dial and is still healthy", n.Addr)
		}
	}
}
