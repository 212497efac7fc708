package router

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/bucket/buckettest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A batch's one outcome, spread over its calls, gives each call what it
// would have got alone, one after the other at the same instant (the
// reset within a µs of rounding).
func TestSpreadIsSequential(t *testing.T) {
	for _, tc := range []struct {
		lim         bucket.Limit
		pre, cost   int64
		n, at       int64
		wantAllowed int64
	}{
		{bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}, 0, 1, 4, 0, 4},
		{bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}, 7, 1, 6, 500_000, 3},
		{bucket.Limit{Capacity: 10, Refill: 3, Period: 1_000_000}, 10, 2, 5, 1_000_000, 1},
		{bucket.Limit{Capacity: 7, Refill: 10, Period: 1_000_000}, 0, 3, 4, 0, 2},
		{bucket.Limit{Capacity: 5, Refill: 1, Period: 1_000_000}, 1, 0, 3, 0, 3},
		// One token is 333333.3 µs of refill: the reset of the first of 60
		// calls is 59 such, not 59 times its µs rounded down.
		{bucket.Limit{Capacity: 100, Refill: 3, Period: 1_000_000}, 0, 1, 60, 0, 60},
	} {
		iv, err := tc.lim.Interval()
		if err != nil {
			t.Fatal(err)
		}
		var tat int64
		if tc.pre > 0 {
			_, tat = bucket.Take(0, buckettest.Start, iv, tc.pre)
		}
		g := &group{iv: iv, cost: tc.cost}
		var want []bucket.Result
		var k int64
		for range tc.n {
			r, store := bucket.Take(tat, buckettest.Start+tc.at, iv, tc.cost)
			if store != 0 {
				tat = store
			}
			if !r.Limited {
				k++
			}
			want = append(want, r)
			g.ws = append(g.ws, &waiter{})
		}
		if k != tc.wantAllowed {
			t.Fatalf("%+v: %d allowed in a row, want %d", tc, k, tc.wantAllowed)
		}
		g.spread(want[len(want)-1], k)
		for i, w := range g.ws {
			got, exp := w.res, want[i]
			d := got.ResetAfter - exp.ResetAfter
			got.ResetAfter, exp.ResetAfter = 0, 0
			if got != exp || d < -1 || d > 1 {
				t.Fatalf("%+v, call %d: got %+v (reset %+d µs off), want %+v", tc, i, w.res, d, want[i])
			}
		}
	}
}

// Every primary gets its share of the tags, the shortest first, and a
// primary with fewer slots than its share gives what it has: the split
// gets fewer sub-buckets rather than a crash.
func TestSplitTags(t *testing.T) {
	tags := slot.NewTags()
	order := slotsByTagLength(tags)
	a, b := &shard{addr: "a"}, &shard{addr: "b"}
	owners := &topology{}
	owners.setOwners(0, slot.Count-1, a)
	owners.setOwners(5, 5, b) // b owns one slot only
	got := splitTags(owners, tags, order, 4)
	if len(got) != 4 || got[0] != tags[order[0]] || slot.Of("{"+got[1]+"}") != 5 ||
		got[2] != tags[order[1]] || got[3] != tags[order[2]] {
		t.Fatalf("got %v, want a's shortest tag, b's only one, then a's next two", got)
	}
	for i := range slot.Count {
		owners.setOwners(i, i, []*shard{a, b}[i*2/slot.Count])
	}
	got = splitTags(owners, tags, order, 5)
	for i, tag := range got {
		if want := []*shard{a, b}[i%2]; owners.ownerOf("{"+tag+"}") != want {
			t.Fatalf("tag %d %q is on %s, want %s", i, tag, owners.ownerOf("{"+tag+"}").addr, want.addr)
		}
		if len(tag) > 2 {
			t.Fatalf("tag %q: want the shortest", tag)
		}
	}
}

// A split key decided by the fallback starts from the tokens its
// sub-buckets were last seen to hold: a key its load kept empty is not
// granted its capacity again when no shard can decide it.
func TestFallbackOfASplitKeyStartsWhereTheClusterLeftIt(t *testing.T) {
	c := NewCluster(ClusterConfig{Seeds: []string{"127.0.0.1:1"}, Share: 1})
	t.Cleanup(c.Close)
	iv, err := bucket.Limit{Capacity: 30, Refill: 30, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	decide := func(key string, empty bool) Result {
		hk := newHotKey(key, false)
		h := &hotCall{hk: hk, st: &splitState{seen: new(subSeen)}, parts: hk.partsFor(&splitState{tags: []string{"a", "b", "c"}}, iv)}
		if len(h.parts) != 3 {
			t.Fatalf("%d parts, want 3", len(h.parts))
		}
		if empty {
			// Each sub-bucket seen empty just now: full a fill time on.
			now := time.Now().UnixMicro()
			for j := range h.parts {
				h.st.seen.fullAt[j].Store(now + fillTime(iv))
			}
		}
		reqs := []Request{{Op: Take, Key: key, Interval: iv, Cost: 1}}
		res := make([]Result, 1)
		c.fallbackHot(h, reqs, res)
		return res[0]
	}
	if r := decide("seen-empty", true); !r.Limited || r.Source != SourceLocal {
		t.Errorf("a key whose sub-buckets were empty: %+v, want limited by the local fallback", r)
	}
	if r := decide("never-seen", false); r.Limited || r.Remaining != 29 {
		t.Errorf("a key never decided here: %+v, want allowed from a full bucket (29 left)", r)
	}
}

// A large, slow limit (3 x 2^18 tokens, 50 an hour: a fill time of
// 5.7e13 µs) is in range, split too, and so is tokens x fill time in the
// hot-key arithmetic: it must not overflow int64 (4.5e19) and start a key
// its load kept empty full again, or tell a denied caller to retry in 1 µs.
func TestSplitArithmeticOfALargeSlowLimit(t *testing.T) {
	c := NewCluster(ClusterConfig{Seeds: []string{"127.0.0.1:1"}, Share: 1})
	t.Cleanup(c.Close)
	iv, err := bucket.Limit{Capacity: 3 << 18, Refill: 50, Period: 3_600_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	fill := fillTime(iv)
	hk := newHotKey("big", false)
	h := &hotCall{hk: hk, st: &splitState{seen: new(subSeen)}, parts: hk.partsFor(&splitState{tags: []string{"a", "b", "c"}}, iv), prevSub: -1}
	if len(h.parts) != 3 {
		t.Fatalf("%d parts, want 3", len(h.parts))
	}
	now := time.Now().UnixMicro()
	for j := range h.parts {
		h.st.seen.fullAt[j].Store(now + fill) // seen empty just now
	}
	reqs := []Request{{Op: Take, Key: "big", Interval: iv, Cost: 1}}
	out, _ := h.logical(bucket.Result{Limited: true, RetryAfter: fill, ResetAfter: fill}, &reqs[0], now)
	// A sibling empty now has a token in fill/capacity, 2.16e8 µs.
	if want := fill / h.parts[1].Capacity; out.RetryAfter < want/2 || out.RetryAfter > 2*want {
		t.Errorf("retry after %d µs, want about %d", out.RetryAfter, want)
	}
	res := make([]Result, 1)
	c.fallbackHot(h, reqs, res)
	if r := res[0]; !r.Limited || r.Source != SourceLocal {
		t.Errorf("a key whose sub-buckets were empty: %+v, want limited by the local fallback", r)
	}
}

// A sibling never seen here is estimated as full as the one just asked
// was before the call: a fresh split reports what the whole bucket has
// left, whichever sub-bucket the call went to and whatever its cost.
func TestSplitEstimateOfAFreshSplit(t *testing.T) {
	iv, err := bucket.Limit{Capacity: 10, Refill: 10, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	hk := newHotKey("k", false)
	parts := hk.partsFor(&splitState{tags: []string{"a", "b", "c"}}, iv)
	if len(parts) != 3 {
		t.Fatalf("%d parts, want 3", len(parts))
	}
	for sub, part := range parts {
		for cost := int64(1); cost <= part.Capacity; cost++ {
			h := &hotCall{hk: hk, st: &splitState{seen: new(subSeen)}, parts: parts, sub: sub, prevSub: -1}
			r := Request{Op: Take, Key: "k", Interval: iv, Cost: cost}
			out, known := h.logical(bucket.Result{Remaining: part.Capacity - cost, RetryAfter: -1, ResetAfter: 1}, &r, time.Now().UnixMicro())
			if known || out.Remaining != iv.Capacity-cost {
				t.Errorf("sub-bucket %d, cost %d: remaining %d (known %v), want %d, estimated", sub, cost, out.Remaining, known, iv.Capacity-cost)
			}
		}
	}
}

// remaining x capacity must not overflow for a large capacity in range
// (3 x 10^12 tokens refilled at 10^6 a second).
func TestSplitEstimateOfALargeCapacity(t *testing.T) {
	iv, err := bucket.Limit{Capacity: 3_000_000_000_000, Refill: 1_000_000, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	hk := newHotKey("big", false)
	h := &hotCall{hk: hk, st: &splitState{seen: new(subSeen)}, parts: hk.partsFor(&splitState{tags: []string{"a", "b", "c"}}, iv), prevSub: -1}
	if len(h.parts) != 3 {
		t.Fatalf("%d parts, want 3", len(h.parts))
	}
	r := Request{Op: Take, Key: "big", Interval: iv, Cost: 1}
	left := h.parts[0].Capacity - 1
	out, known := h.logical(bucket.Result{Remaining: left, RetryAfter: -1, ResetAfter: 1}, &r, time.Now().UnixMicro())
	if want := iv.Capacity - 1; known || out.Remaining < want-2 || out.Remaining > want+2 {
		t.Fatalf("remaining %d (known %v), want about %d, estimated", out.Remaining, known, want)
	}
}

// A RESET of a split key that no shard can decide resets this instance's
// fallback bucket, as it says, for the rest of the outage: the bucket is
// not started again from the tokens the sub-buckets were last seen to
// hold, which would undo the reset at the next call. Once the outage is
// over, the next one starts from them again.
func TestSplitKeyResetInFallbackHolds(t *testing.T) {
	c := NewCluster(ClusterConfig{Seeds: []string{"127.0.0.1:1"}, Share: 1, HotCooldown: time.Minute})
	t.Cleanup(c.Close)
	iv, err := bucket.Limit{Capacity: 30, Refill: 30, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	const key = "reset-in-outage"
	hk := c.hot.follow(key, lua.Split{Tags: []string{"a", "b", "c"}, Gen: "1", Base: "0", TTL: time.Minute}, time.Now().UnixNano())
	st := hk.split.Load()
	parts := hk.partsFor(st, iv)
	// Each sub-bucket seen empty just now: full a fill time on.
	now := time.Now().UnixMicro()
	for j := range parts {
		st.seen.fullAt[j].Store(now + fillTime(iv))
	}
	take := func() Result {
		reqs := []Request{{Op: Take, Key: key, Interval: iv, Cost: 1}}
		res := make([]Result, 1)
		c.fallbackHot(&hotCall{hk: hk, st: st, parts: parts}, reqs, res)
		return res[0]
	}
	if r := take(); !r.Limited {
		t.Fatalf("before the reset: %+v, want limited from the state seen", r)
	}
	res := make([]Result, 1)
	c.Decide(context.Background(), []Request{{Op: Reset, Key: key}}, res)
	if !errors.Is(res[0].Err, ErrResetNotInCluster) {
		t.Fatalf("reset with no cluster: %+v, want ErrResetNotInCluster", res[0])
	}
	if r := take(); r.Limited || r.Remaining != 29 {
		t.Fatalf("after the reset: %+v, want allowed from a full bucket (29 left)", r)
	}

	// Reset again, with no call after it, and the outage ends: the next
	// outage starts the bucket from the state seen again.
	c.Decide(context.Background(), []Request{{Op: Reset, Key: key}}, res)
	c.topo.Store(&topology{}) // no shard: every one that owns slots is healthy
	c.releaseFallback()
	if r := take(); !r.Limited {
		t.Fatalf("in the next outage: %+v, want limited from the state seen", r)
	}
}
