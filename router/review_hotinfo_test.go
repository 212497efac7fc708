package router_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// listed is key's line among r's hot keys, if listed.
func listed(r *router.Cluster, key string) (router.HotKeyStats, bool) {
	for _, h := range stats(r).Hot {
		if h.Key == key {
			return h, true
		}
	}
	return router.HotKeyStats{}, false
}

// A key this instance split is "detected" in INFO for the whole life of
// its split, cooling included: "following" means another instance's
// split, and the instance that split the key listed it so from the
// moment it cooled until the split lapsed. The other instance follows it
// throughout, and once the split lapses neither lists the key.
func TestHotKeyOwnCoolingSplitIsNotFollowed(t *testing.T) {
	c, _, _ := hotCluster(t, clustertest.Config{Replicas: -1})
	cfg := router.ClusterConfig{HotThreshold: 300, HotCooldown: 300 * time.Millisecond}
	a, b := newRouter(t, c.Addrs(), cfg), newRouter(t, c.Addrs(), cfg)
	waitConnected(t, a)
	waitConnected(t, b)
	iv := interval(t, 1000, 1000, 1_000_000)
	const key = "owncooling"
	var s tally
	stop := make(chan struct{})
	wg := hammer([]*router.Cluster{a}, key, iv, 4, time.Millisecond, stop, &s)
	waitFor(t, 5*time.Second, "split by a", func() bool { h, ok := listed(a, key); return ok && h.SubBuckets > 0 })
	decide(b, key, iv)
	if h, ok := listed(b, key); !ok || h.State != "following" || h.SubBuckets == 0 {
		t.Errorf("b after a call on a's split: %+v (listed %v), want following it", h, ok)
	}
	close(stop)
	wg.Wait()
	waitFor(t, 5*time.Second, "a's split lapsed and the key unlisted", func() bool {
		h, ok := listed(a, key)
		if ok && h.SubBuckets > 0 && h.State != "detected" {
			t.Fatalf("a's own split, cooling: %+v, want state detected", h)
		}
		return !ok
	})
	waitFor(t, time.Second, "the key unlisted on b", func() bool { _, ok := listed(b, key); return !ok })
	if st := stats(a); st.HotKeys != 0 {
		t.Errorf("a tracks %d hot keys once the split lapsed, want 0", st.HotKeys)
	}
}
