package proxy_test

import (
	"context"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A hot key split over the cluster's primaries is decided by its
// sub-buckets on both serving paths (the event loops send its steps on
// their own connections, the goroutine path through the coalescer), and
// admits its limit within a token per sub-bucket whatever the
// concurrency.
func TestHotKeyOnEachServingPath(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotKeys: []string{"hot:*"}})
		cfg.Decider = r
		cl := newGoRedis(t, serveConfig(t, cfg))
		key := "hot:" + t.Name()
		const capacity = 30
		limit := []any{"THROTTLE", key, capacity, capacity, "1h"}
		if v := throttle(t, cl, limit...); v[0] != 0 {
			t.Fatalf("the first call: %v, want allowed", v)
		}
		parts := waitSplit(t, r, key)
		if parts < 2 {
			t.Fatalf("split into %d sub-buckets, want one per primary", parts)
		}
		before := r.Stats().Cluster
		const clients, each = 6, 20
		var wg sync.WaitGroup
		allowed := make([]int, clients)
		for i := range clients {
			wg.Go(func() {
				p := cl.Pipeline()
				cmds := make([]interface{ Int64Slice() ([]int64, error) }, each)
				for j := range cmds {
					cmds[j] = p.Do(context.Background(), limit...)
				}
				p.Exec(context.Background())
				for _, cmd := range cmds {
					v, err := cmd.Int64Slice()
					if err != nil {
						t.Error(err)
						return
					}
					if v[0] == 0 {
						allowed[i]++
					}
				}
			})
		}
		wg.Wait()
		total := 1
		for _, n := range allowed {
			total += n
		}
		if total > capacity || total < capacity-parts {
			t.Fatalf("%d of %d calls allowed on a bucket of %d split in %d, want %d to %d", total, 1+clients*each, capacity, parts, capacity-parts, capacity)
		}
		after := r.Stats().Cluster
		if split := after.Split - before.Split; split != clients*each {
			t.Fatalf("%d of %d calls decided by the split (its sub-buckets, or its last denial)", split, clients*each)
		}
		if fb := after.Decisions[router.SourceLocal] + after.Decisions[router.SourceOpen] + after.Decisions[router.SourceClosed]; fb != 0 {
			t.Fatalf("%d decisions by the fallback", fb)
		}
	})
}

// waitSplit waits until r has split key and returns its sub-buckets.
func waitSplit(t *testing.T, r *router.Cluster, key string) int {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, h := range r.Stats().Cluster.Hot {
			if h.Key == key && h.SubBuckets > 0 {
				return h.SubBuckets
			}
		}
	}
	t.Fatalf("%s was not split within 5 s", key)
	return 0
}

// A hot key's call whose sub-bucket's primary hangs is decided by a
// sibling, in the cluster, once the event loop finds the node overdue: the
// sibling's step is sent while the loop drops the hung node.
func TestHotCallOfAHungShardGoesOnToASibling(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: 150 * time.Millisecond, HotKeys: []string{"hot:*"}})
	cl := goredis.NewClient(&goredis.Options{Addr: serveConfig(t, proxy.Config{Decider: r}), MaxRetries: -1, ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { cl.Close() })
	key := "hot:hung"
	limit := []any{"THROTTLE", key, 1000, 1000, "1h"}
	throttle(t, cl, limit...)
	if parts := waitSplit(t, r, key); parts != len(c.Nodes) {
		t.Fatalf("split in %d, want one sub-bucket per primary (%d)", parts, len(c.Nodes))
	}
	// Batches go to the sub-buckets in turn: these connect the loop to
	// every primary (a node that does not answer as it is dialled takes
	// the dial's own timeout instead).
	for range len(c.Nodes) + 1 {
		throttle(t, cl, limit...)
	}
	parent := primaryOf(t, c, router.KeyPrefix+key)
	victim := c.Nodes[0]
	if victim == parent {
		victim = c.Nodes[1]
	}
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Resume() })
	// One of these goes to the hung sub-bucket.
	for i := range len(c.Nodes) + 1 {
		v, err := cl.Do(context.Background(), limit...).Int64Slice()
		if err != nil {
			t.Fatalf("call %d with %s hung: %v", i, victim.Addr, err)
		}
		if v[0] != 0 {
			t.Fatalf("call %d: %v, want allowed", i, v)
		}
	}
	st := r.Stats().Cluster
	for _, sh := range st.Shards {
		if sh.Addr == victim.Addr && sh.Healthy {
			t.Fatalf("%s hung and still healthy: no call went to it", victim.Addr)
		}
	}
	if fb := st.Decisions[router.SourceLocal] + st.Decisions[router.SourceOpen] + st.Decisions[router.SourceClosed]; fb != 0 {
		t.Fatalf("%d decisions by the fallback, want the hung sub-bucket's call decided by a sibling", fb)
	}
}
