package router

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
)

// An emptied split of 10 tokens in three (4, 3, 3), seen empty just now,
// with a denial of cost 1 recorded from it.
func emptiedSplit(t *testing.T) (*hotKey, *splitState, bucket.Interval) {
	t.Helper()
	iv, err := bucket.Limit{Capacity: 10, Refill: 10, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	hk := newHotKey("k", false)
	st := &splitState{tags: []string{"a", "b", "c"}, gen: "1", until: time.Now().Add(time.Minute).UnixNano(), seen: new(subSeen)}
	parts := hk.partsFor(st, iv)
	if len(parts) != 3 || parts[0].Capacity != 4 {
		t.Fatalf("parts %+v, want 4, 3, 3", parts)
	}
	now := time.Now().UnixMicro()
	for j := range parts {
		st.seen.fullAt[j].Store(now + fillTime(iv))
	}
	h := &hotCall{hk: hk, st: st, parts: parts, sub: 1, prevSub: -1}
	r := Request{Op: Take, Key: "k", Interval: iv, Cost: 1}
	out, known := h.logical(bucket.Result{Limited: true, RetryAfter: fillTime(iv) / 3, ResetAfter: fillTime(iv)}, &r, now)
	if !known || !out.Limited {
		t.Fatalf("the denial: %+v (known %v)", out, known)
	}
	hk.deny.Store(&denial{seen: st.seen, iv: iv, cost: 1, res: out, at: now})
	return hk, st, iv
}

// A call costing more than the one last denied is denied here too, but
// told its own wait: the cost-1 denial's retry_after would have it retry
// before any sub-bucket could hold its cost, and be denied again.
func TestDeniedHereRetryIsForTheCallsCost(t *testing.T) {
	hk, st, iv := emptiedSplit(t)
	fill := fillTime(iv)
	for _, tc := range []struct {
		cost        int64
		least, most int64 // µs
	}{
		// The sub-bucket of 4 has 3 tokens at 3/4 of its fill time.
		{3, fill*3/4 - 1000, fill},
		{4, fill - 1000, fill},
		// More than any sub-bucket holds: when the split lapses.
		{5, time.Minute.Microseconds() - 1_000_000, time.Minute.Microseconds()},
		// More than the bucket holds: never.
		{11, -1, -1},
	} {
		out, ok := hk.denied(st, &Request{Op: Take, Key: "k", Interval: iv, Cost: tc.cost})
		if !ok || !out.Limited {
			t.Fatalf("cost %d: %+v (denied here %v), want denied here", tc.cost, out, ok)
		}
		if out.RetryAfter < tc.least || out.RetryAfter > tc.most {
			t.Errorf("cost %d: retry after %d µs, want %d to %d", tc.cost, out.RetryAfter, tc.least, tc.most)
		}
	}
}

// A call too big for any sub-bucket waits for the split to lapse, and
// also for the whole bucket to hold its cost: an emptied bucket of 10 a
// second has 5 tokens in 500 ms, not when a split 100 ms from its end
// lapses, nor 1 µs on while the split is held past its end.
func TestTooBigForTheSplitWaitsForTheWholeBucket(t *testing.T) {
	for _, left := range []time.Duration{100 * time.Millisecond, -time.Second} {
		hk, st, iv := emptiedSplit(t)
		st.until = time.Now().Add(left).UnixNano()
		h := &hotCall{hk: hk, st: st, parts: hk.partsFor(st, iv), sub: 1, prevSub: -1}
		r := Request{Op: Take, Key: "k", Interval: iv, Cost: 5}
		now := time.Now().UnixMicro()
		out, _ := h.logical(bucket.Result{Limited: true, RetryAfter: -1, ResetAfter: fillTime(iv)}, &r, now)
		if want := fillTime(iv) / 2; !out.Limited || out.RetryAfter < want-1000 || out.RetryAfter > want+1000 {
			t.Errorf("split ending in %v: %+v, want denied with retry after about %d µs", left, out, want)
		}
	}
}

// A denied call is told fewer tokens than its cost, as one bucket would
// tell it, even when the sub-buckets together hold more: 2 in each of
// 4, 3 and 3 is 6, but no sub-bucket has 3 for it.
func TestDeniedRemainingIsBelowTheCost(t *testing.T) {
	hk, st, iv := emptiedSplit(t)
	parts := hk.partsFor(st, iv)
	fill := fillTime(iv)
	now := time.Now().UnixMicro()
	st.seen.fullAt[0].Store(now + fill/2)
	st.seen.fullAt[2].Store(now + fill/3)
	h := &hotCall{hk: hk, st: st, parts: parts, sub: 1, prevSub: -1}
	r := Request{Op: Take, Key: "k", Interval: iv, Cost: 3}
	out, _ := h.logical(bucket.Result{Limited: true, Remaining: 2, RetryAfter: fill / 3, ResetAfter: fill / 3}, &r, now)
	if !out.Limited || out.Remaining != 2 {
		t.Errorf("%+v, want denied with 2 left", out)
	}
}

// deniedAgo is emptiedSplit with a cost-3 denial ago µs before now, when
// every sub-bucket was last seen empty; fill is the bucket's fill time.
func deniedAgo(t *testing.T, ago int64) (hk *hotKey, st *splitState, iv bucket.Interval, fill, now int64) {
	hk, st, iv = emptiedSplit(t)
	fill = fillTime(iv)
	now = time.Now().UnixMicro()
	at := now - ago
	for j := range hk.partsFor(st, iv) {
		st.seen.fullAt[j].Store(at + fill)
	}
	hk.deny.Store(&denial{seen: st.seen, iv: iv, cost: 3, at: at,
		res: bucket.Result{Limited: true, Remaining: 0, RetryAfter: fill * 3 / 4, ResetAfter: fill}})
	return hk, st, iv, fill, now
}

// A call denied here is told the tokens of now, not those of the
// denial it repeats: 400 ms after a cost-3 denial on an emptied split of
// 10 a second, each sub-bucket has refilled a token.
func TestDeniedHereCountsTheRefillSince(t *testing.T) {
	hk, st, iv, fill, _ := deniedAgo(t, 400_000)
	out, ok := hk.denied(st, &Request{Op: Take, Key: "k", Interval: iv, Cost: 3})
	if !ok || !out.Limited || out.Remaining != 2 || out.ResetAfter > fill-400_000 {
		t.Errorf("%+v (denied here %v), want denied with 2 left (3 between them) and reset within %d µs", out, ok, fill-400_000)
	}
}

// Calls cheaper than a denial go on taking from the sub-buckets, and a
// call denied here after them is told the wait they left: a cost-3
// denial 100 ms ago, then the sub-bucket of 4 emptied again by cost-1
// calls, has its 3 tokens 750 ms from now, not 650.
func TestDeniedHereWaitsForWhatCheaperCallsTook(t *testing.T) {
	hk, st, iv, fill, now := deniedAgo(t, 100_000)
	st.seen.fullAt[0].Store(now + fill)
	out, ok := hk.denied(st, &Request{Op: Take, Key: "k", Interval: iv, Cost: 3})
	if want := fill*3/4 - 1000; !ok || !out.Limited || out.RetryAfter < want || out.ResetAfter < fill-1000 {
		t.Errorf("%+v (denied here %v), want denied with retry after at least %d µs and reset after about %d", out, ok, want, fill)
	}
}

// A call too big for the split's sub-buckets closes the split from here,
// so that the next one has room for it when its denial says, even when
// it is denied here without a step.
func TestTooBigDeniedHereClosesTheSplit(t *testing.T) {
	c := NewCluster(ClusterConfig{Seeds: []string{"127.0.0.1:1"}, Share: 1})
	t.Cleanup(c.Close)
	hk, st, iv := emptiedSplit(t)
	reqs := []Request{{Op: Take, Key: "k", Interval: iv, Cost: 5}}
	res := make([]Result, 1)
	if c.startHot(0, &reqs[0], hk, st, &topology{}, reqs, res, nil, nil) || !res[0].Limited {
		t.Fatalf("%+v, want denied here", res[0])
	}
	if !hk.detected.Load() {
		t.Error("the split was left as it is: the next one has no room for the call either")
	}
}

// A call denied by its sub-bucket and then by a sibling is told the first
// one's figures as of now, not as of its own step, sent earlier (a round
// trip and a queue before): emptied 5 ms ago, it is full in 995 ms.
func TestSiblingRetryCountsTheFirstStepFromWhenItWasSent(t *testing.T) {
	hk, st, iv := emptiedSplit(t)
	fill := fillTime(iv)
	now := time.Now().UnixMicro()
	sent := now - 5_000
	st.seen.fullAt[0].Store(sent + fill)
	st.seen.fullAt[1].Store(now + fill/2)
	st.seen.fullAt[2].Store(now + fill/2)
	h := &hotCall{hk: hk, st: st, parts: hk.partsFor(st, iv), sub: 1, prevSub: 0}
	r := Request{Op: Take, Key: "k", Interval: iv, Cost: 2}
	out, _ := h.logical(bucket.Result{Limited: true, Remaining: 1, RetryAfter: fill / 6, ResetAfter: fill / 2}, &r, now)
	if !out.Limited || out.ResetAfter > fill-5_000 {
		t.Errorf("%+v, want denied with reset after %d µs", out, fill-5_000)
	}
}
