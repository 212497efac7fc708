package router

import (
	"context"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/bucket/buckettest"
)

func interval(t testing.TB, c, r, p int64) bucket.Interval {
	t.Helper()
	iv, err := bucket.Limit{Capacity: c, Refill: r, Period: p}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	return iv
}

// The embedded backend replays the known-answer vectors on its own clock.
func TestMemoryVectors(t *testing.T) {
	var now int64
	m := newMemory(func() int64 { return now }, 0)
	for ci, c := range buckettest.Cases() {
		key := strconv.Itoa(ci)
		res := make([]Result, 1)
		for i, s := range c.Steps {
			iv, err := c.LimitAt(s).Interval()
			if err != nil {
				t.Fatal(err)
			}
			now = buckettest.Start + s.T
			m.Decide(context.Background(), []Request{{Key: key, Interval: iv, Cost: s.Cost}}, res)
			if got := buckettest.Got(res[0].Result); got != s.Want {
				t.Fatalf("%s, step %d: got %v, want %v", c.Name, i, got, s.Want)
			}
		}
	}
}

func TestMemoryReset(t *testing.T) {
	now := int64(buckettest.Start)
	m := newMemory(func() int64 { return now }, 0)
	iv := interval(t, 2, 1, 1_000_000)
	res := make([]Result, 3)
	m.Decide(context.Background(), []Request{
		{Op: Reset, Key: "k"},
		{Key: "k", Interval: iv, Cost: 2},
		{Op: Reset, Key: "k"},
	}, res)
	if res[0].Existed || !res[2].Existed || res[1].Limited {
		t.Fatalf("got %+v, want reset of nothing, a take, reset of a bucket", res)
	}
	m.Decide(context.Background(), []Request{{Key: "k", Interval: iv, Cost: 2}}, res[:1])
	if res[0].Limited {
		t.Fatal("bucket not full after reset")
	}
	now += 2_000_000 // full again: the same as missing
	m.Decide(context.Background(), []Request{{Op: Reset, Key: "k"}}, res[:1])
	if res[0].Existed {
		t.Fatal("a bucket that refilled counts as existing")
	}
}

// Buckets that have refilled are forgotten, so a stream of distinct keys
// costs memory in proportion to the buckets that are not full, not to
// every key ever seen.
func TestMemoryForgetsFullBuckets(t *testing.T) {
	now := int64(buckettest.Start)
	m := newMemory(func() int64 { return now }, 0)
	iv := interval(t, 10, 10, 1_000_000) // full again 100 ms after one take
	res := make([]Result, 1)
	for i := range 200_000 {
		m.Decide(context.Background(), []Request{{Key: strconv.Itoa(i), Interval: iv, Cost: 1}}, res)
		now += 10 // 10 µs apart: about 10,000 buckets are not full at any time
	}
	if n := m.Len(); n > 4*10_000+memShards*minSweep {
		t.Fatalf("%d buckets held for about 10,000 live ones", n)
	}
}

func BenchmarkMemoryDecide(b *testing.B) {
	m := NewMemory(0)
	iv := interval(b, 1000, 100, 1_000_000)
	reqs := []Request{{Key: "user:12345", Interval: iv, Cost: 1}}
	res := make([]Result, 1)
	b.ReportAllocs()
	for b.Loop() {
		m.Decide(context.Background(), reqs, res)
	}
}

// A flood of distinct keys whose buckets take a day to refill stays under
// the cap.
func TestMemoryCap(t *testing.T) {
	now := int64(buckettest.Start)
	const limit = 10_000
	m := newMemory(func() int64 { return now }, limit)
	iv := interval(t, 10, 1, 86_400_000_000)
	res := make([]Result, 1)
	peak := 0
	for i := range 1_000_000 {
		m.Decide(context.Background(), []Request{{Key: strconv.Itoa(i), Interval: iv, Cost: 1}}, res)
		if i%1000 == 0 {
			peak = max(peak, m.Len())
		}
	}
	if n := m.Len(); n > limit || peak > limit {
		t.Fatalf("holds %d buckets (peak %d), cap %d", n, peak, limit)
	}
	if n := m.Len(); n < limit/2 {
		t.Fatalf("holds only %d buckets: the cap forgets too eagerly", n)
	}
}

// A cap so small that a shard holds one bucket (under 128 keys) still
// keeps the bucket just taken from: forgetting it at once would grant
// every call a full bucket.
func TestMemoryTinyCapKeepsTheBucketTaken(t *testing.T) {
	now := int64(buckettest.Start)
	m := newMemory(func() int64 { return now }, 1)
	iv := interval(t, 1, 1, 86_400_000_000)
	res := make([]Result, 2)
	m.Decide(context.Background(), []Request{{Key: "k", Interval: iv, Cost: 1}, {Key: "k", Interval: iv, Cost: 1}}, res)
	if res[0].Limited || !res[1].Limited {
		t.Fatalf("got %+v, want one allowed then one denied", res)
	}
}
