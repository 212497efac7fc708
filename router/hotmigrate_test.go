package router_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// halfMove starts moving key's slot to another primary (IMPORTING on the
// target, MIGRATING on the source) and migrates key alone: the source
// answers ASK for it until the resharding ends. finish ends it.
func halfMove(t *testing.T, ctx context.Context, c *clustertest.Cluster, key string) (finish func()) {
	t.Helper()
	sl := slot.Of(key)
	from, err := c.Primary(ctx, sl)
	if err != nil {
		t.Fatal(err)
	}
	to := c.Nodes[0]
	if to == from {
		to = c.Nodes[1]
	}
	if _, err := c.StartMove(ctx, sl, to); err != nil {
		t.Fatal(err)
	}
	if err := c.Migrate(ctx, from, to, key); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := c.MoveSlot(ctx, sl, to); err != nil {
			t.Fatal(err)
		}
	}
}

// A hot key's parent bucket (its split marker) is migrated while its slot
// is still being moved: the old owner answers ASK for it. The split must
// go on being renewed on the new owner, as a cluster client would follow
// the ASK, not lapse for as long as the resharding takes, and its calls
// stay decided by the cluster.
func TestHotKeySplitRenewedWhileItsSlotMigrates(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"tenant:*"}, HotCooldown: 600 * time.Millisecond})
	waitConnected(t, r)
	const key = "tenant:big"
	parent := router.KeyPrefix + key
	iv := interval(t, 1000, 1000, 1_000_000)
	stop := make(chan struct{})
	var s tally
	wg := hammer([]*router.Cluster{r}, key, iv, 2, 2*time.Millisecond, stop, &s)
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, 2*time.Second, "split marker", func() bool {
		_, ok := marker(ctx, cl, key)
		return ok
	})
	// until is the marker's end, in ms on its shard's clock (0: none).
	until := func() int64 {
		v, _ := cl.Do(ctx, cl.B().Get().Key(parent).Build()).ToString()
		f := strings.SplitN(v, ":", 5)
		if len(f) != 5 || !strings.HasPrefix(v, "~") {
			return 0
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		return n
	}
	finish := halfMove(t, ctx, c, parent)
	u0 := until()
	if u0 == 0 {
		t.Fatal("no split marker on the importing node")
	}
	// The marker holds 600ms, renewed at half: two renewals on.
	waitFor(t, 5*time.Second, "the split renewed on the importing node", func() bool { return until() >= u0+600 })
	if n := s.errors.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed, the first with %v", n, s.calls.Load(), s.firstErr.Load())
	}
	if n := s.fallback.Load(); n > 0 {
		t.Fatalf("%d of %d calls decided by the fallback", n, s.calls.Load())
	}
	finish()
}

// A hot key that is not split (each call's cost leaves no room for two
// sub-buckets) has its calls batched on its own bucket, on its shard's
// node; THROTTLE.RESET goes there too. Once its bucket is migrated while
// its slot is being moved, the node answers ASK: the calls must follow it
// to the importing node, as a cluster client does, not go to the
// fallback (a fresh local bucket would admit what the cluster's denies),
// and the reset must reach the cluster's bucket.
func TestHotKeyBucketFollowsItsSlotMigrating(t *testing.T) {
	c, ctx, _ := hotCluster(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"tenant:*"}})
	waitConnected(t, r)
	const key = "tenant:whole"
	iv := interval(t, 1000, 1, 3600_000_000)
	take := func() router.Result {
		res := make([]router.Result, 1)
		router.SubmitAndWait(r, ctx, []router.Request{{Key: key, Interval: iv, Cost: 600}}, res)
		return res[0]
	}
	if got := take(); got.Err != nil || got.Limited || got.Source != router.SourceCluster {
		t.Fatalf("first call: %+v, want allowed by the cluster", got)
	}
	finish := halfMove(t, ctx, c, router.KeyPrefix+key)
	for i := range 3 {
		if got := take(); got.Err != nil || !got.Limited || got.Source != router.SourceCluster || got.Remaining != 400 {
			t.Fatalf("call %d on the migrated bucket: %+v, want denied by the cluster with 400 left", i, got)
		}
	}
	res := make([]router.Result, 1)
	router.SubmitAndWait(r, ctx, []router.Request{{Op: router.Reset, Key: key}}, res)
	if res[0].Err != nil || !res[0].Existed {
		t.Fatalf("reset of the migrated bucket: %+v, want it deleted", res[0])
	}
	if got := take(); got.Err != nil || got.Limited || got.Source != router.SourceCluster || got.Remaining != 400 {
		t.Fatalf("after the reset: %+v, want allowed by the cluster from a full bucket", got)
	}
	finish()
}
