package proxy_test

import (
	"context"
	"sync"
	"testing"
	"time"

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
		var parts int
		waitUntil(t, "the declared hot key is split", func() bool { parts = subBuckets(r, key); return parts > 0 })
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

// subBuckets is the sub-buckets of r's live split of key, 0 when r has
// none.
func subBuckets(r *router.Cluster, key string) int {
	for _, h := range r.Stats().Cluster.Hot {
		if h.Key == key {
			return h.SubBuckets
		}
	}
	return 0
}
