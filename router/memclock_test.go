package router

import (
	"context"
	"hash/maphash"
	"runtime"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/bucket/buckettest"
)

// A decision that read the clock before another one, on the same shard,
// swept with a later clock must not see the bucket that sweep forgot as
// full: at its own, earlier instant the bucket was not, and granting it
// admits more than capacity plus the refill (here 3 calls of capacity 1
// in 1.5 tokens' time).
func TestMemorySweepByALaterClockAdmitsNoExtra(t *testing.T) {
	t0 := int64(buckettest.Start)
	now := t0
	var hook func() // run once, inside the next read of the clock
	m := newMemory(func() int64 {
		v := now
		if h := hook; h != nil {
			hook = nil
			h()
		}
		return v
	}, 0)
	iv := interval(t, 1, 1, 1000) // one token per ms
	shard := func(k string) uint64 { return maphash.String(m.seed, k) % memShards }
	// Fill k's shard to one under its sweep threshold with buckets that
	// stay empty, so that the next new bucket there sweeps it.
	long := interval(t, 1, 1, 86_400_000_000)
	var fresh []string
	for i := 0; len(fresh) < minSweep; i++ {
		if k := "f" + strconv.Itoa(i); shard(k) == shard("k") {
			fresh = append(fresh, k)
		}
	}
	res := make([]Result, 1)
	take := func(key string, iv0 bucket.Interval) Result {
		m.Decide(context.Background(), []Request{{Key: key, Interval: iv0, Cost: 1}}, res)
		return res[0]
	}
	allowed := 0
	if !take("k", iv).Limited { // at t0: the token
		allowed++
	}
	for _, k := range fresh[:minSweep-2] {
		take(k, long)
	}
	// At t0+500 µs a call on k reads the clock; before it takes the shard's
	// lock, another call at t0+1000 adds a bucket there and sweeps k, full
	// by its clock.
	now = t0 + 500
	hook = func() {
		now = t0 + 1000
		take(fresh[minSweep-2], long)
	}
	if !take("k", iv).Limited {
		allowed++
	}
	now = t0 + 1500
	if !take("k", iv).Limited {
		allowed++
	}
	// Over [t0, t0+1500 µs] the bucket holds 1 token plus 1.5 refilled.
	if allowed > 2 {
		t.Fatalf("%d calls allowed in 1.5 ms at capacity 1, 1 per ms", allowed)
	}
}

// A flood of distinct keys, then calls on a few keys only: the flood's
// buckets, full again, are forgotten on the clock, and their map's memory
// let go, without waiting for new keys to grow the shards to their next
// sweep.
func TestMemoryForgetsAPastFloodWithoutNewKeys(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	now := int64(buckettest.Start)
	m := newMemory(func() int64 { return now }, 0)
	iv := interval(t, 10, 10, 1_000_000)
	res := make([]Result, 1)
	base := heap()
	for i := range 500_000 {
		m.Decide(context.Background(), []Request{{Key: "flood:" + strconv.Itoa(i), Interval: iv, Cost: 1}}, res)
	}
	flood := heap()
	now += 3600_000_000 // an hour on, every bucket is full
	for i := range 100 {
		m.Decide(context.Background(), []Request{{Key: "few:" + strconv.Itoa(i%10), Interval: iv, Cost: 1}}, res)
		now += 20_000
	}
	if n := m.Len(); n > 10 {
		t.Fatalf("%d buckets held an hour after the flood, 10 keys in use", n)
	}
	if after := heap(); after > base+(flood-base)/4 {
		t.Fatalf("heap %d MB after the flood's buckets went, %d MB with them, %d MB before", after>>20, flood>>20, base>>20)
	}
	runtime.KeepAlive(m)
}
