package router_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// waitLapsed waits until key's split has ended (its tags closed with
// "!") and lapsed.
func waitLapsed(t *testing.T, ctx context.Context, cl rueidis.Client, key string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the split ended and lapsed", func() bool {
		v, err := cl.Do(ctx, cl.B().Get().Key(router.KeyPrefix+key).Build()).ToString()
		f := strings.Split(v, ":")
		if err != nil || len(f) != 5 || !strings.HasSuffix(f[4], "!") {
			return false
		}
		until, err := strconv.ParseInt(f[1], 10, 64) // ms, on the shard's clock: this machine's
		return err == nil && time.Now().UnixMilli() > until
	})
}

// A key asked with two limits: one that cannot be split exactly, held
// whole by the first sub-bucket and drained there, and, last, one split
// over all three. The bucket the split lapses into must not be fuller
// than the first sub-bucket, which is all of the first limit: the mean
// of the three, the last limit's, counted the two it never took from as
// full (two thirds of its capacity again).
func TestHotKeyMixedLimitsLapseNoFullerThanEach(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	const key = "mixed"
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{key}, HotCooldown: 600 * time.Millisecond})
	waitConnected(t, r)
	whole := interval(t, 100_000, 1, 3600_000_000) // a token an hour: nothing refills meanwhile
	split := interval(t, 30, 30, 3600_000_000)
	if res := decide(r, key, whole); res.Err != nil || res.Limited {
		t.Fatalf("the first call: %+v", res)
	}
	waitFor(t, 2*time.Second, "the split in 3", func() bool { sp, ok := marker(ctx, cl, key); return ok && len(sp.Tags) == 3 })
	// In one round, so that no renewal reads between the drain and the
	// call of the other limit.
	reqs := []router.Request{
		{Key: key, Interval: whole, Cost: 33_333},
		{Key: key, Interval: whole, Cost: 33_333},
		{Key: key, Interval: whole, Cost: 33_333},
		{Key: key, Interval: split, Cost: 1},
	}
	res := make([]router.Result, len(reqs))
	router.SubmitAndWait(r, ctx, reqs, res)
	if res[3].Err != nil {
		t.Fatal(res[3].Err)
	}
	for i, got := range res[:3] {
		if got.Err != nil || got.Limited {
			t.Fatalf("call %d of the round: %+v", i, got)
		}
	}
	waitLapsed(t, ctx, cl, key)
	peek := make([]router.Result, 1)
	router.SubmitAndWait(r, ctx, []router.Request{{Key: key, Interval: whole, Cost: 0}}, peek)
	// 100,000 - 1 - 3 * 33,333, give or take the refill.
	if got := peek[0].Remaining; peek[0].Err != nil || got > 2 {
		t.Fatalf("after the split lapsed: %d remaining (%v), want at most 2", got, peek[0].Err)
	}
}

// A limit of fewer tokens than there are primaries (2 here, of 3) is
// split in as many sub-buckets as it has tokens: the instance that
// splits the key saw it, and a split leaves each call its cost. Across
// the split, a resharding that closes it and makes it anew, and its
// lapse once cooled, the key admits its limit (a refill of one an hour
// adds none meanwhile).
func TestHotKeySmallLimitAcrossReshardingAndLapse(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	const key = "small"
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{key}, HotCooldown: 600 * time.Millisecond})
	waitConnected(t, r)
	const capacity = 2
	iv := interval(t, capacity, 1, 3600_000_000)
	var allowed int64
	call := func() {
		t.Helper()
		if res := decide(r, key, iv); res.Err != nil {
			t.Fatal(res.Err)
		} else if !res.Limited {
			allowed++
		}
	}
	call()
	var sp lua.Split
	waitFor(t, 2*time.Second, "split marker", func() bool {
		var ok bool
		sp, ok = marker(ctx, cl, key)
		return ok
	})
	if len(sp.Tags) != capacity {
		t.Fatalf("a limit of %d split in %d (%v), want %d", capacity, len(sp.Tags), sp.Tags, capacity)
	}
	for range 20 {
		call()
	}
	to, err := c.Primary(ctx, slot.Of("{"+sp.Tags[1]+"}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MoveSlot(ctx, slot.Of("{"+sp.Tags[0]+"}"), to); err != nil {
		t.Fatal(err)
	}
	// Asked on, so that it stays hot, until the split is made anew.
	waitFor(t, 5*time.Second, "the split made anew after the resharding", func() bool {
		call()
		v, err := cl.Do(ctx, cl.B().Get().Key(router.KeyPrefix+key).Build()).ToString()
		next, ok := lua.Marker(v)
		return err == nil && ok && next.Gen != sp.Gen && !strings.HasSuffix(v, "!")
	})
	waitLapsed(t, ctx, cl, key)
	peek := make([]router.Result, 1)
	router.SubmitAndWait(r, ctx, []router.Request{{Key: key, Interval: iv, Cost: 0}}, peek)
	if peek[0].Err != nil {
		t.Fatal(peek[0].Err)
	}
	if total := allowed + peek[0].Remaining; total > capacity {
		t.Fatalf("%d calls allowed and %d tokens left: %d of a capacity of %d", allowed, peek[0].Remaining, total, capacity)
	}
}
