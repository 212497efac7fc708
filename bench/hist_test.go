package main

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 1 << 20, 1<<40 + 12345, 1<<63 + 1} {
		b := bucketOf(v)
		if b < prev {
			t.Fatalf("bucket of %d is %d, below the bucket of a smaller value (%d)", v, b, prev)
		}
		prev = b
		if high := bucketHigh(b); high < v || (b > 0 && bucketHigh(b-1) >= v) {
			t.Fatalf("%d falls in bucket %d whose range ends at %d (previous ends at %d)", v, b, high, bucketHigh(b-1))
		}
		if v >= 128 && float64(bucketHigh(b)-v) > float64(v)/128 {
			t.Fatalf("bucket of %d ends at %d: more than 1/128 away", v, bucketHigh(b))
		}
	}
}

func TestQuantilesAgainstSortedSamples(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h hist
	samples := make([]uint64, 100_000)
	for i := range samples {
		// A long tail, as latencies have.
		samples[i] = uint64(50 + r.ExpFloat64()*300)
		if i%1000 == 0 {
			samples[i] *= 40
		}
		h.record(samples[i])
	}
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		exact := samples[max(int(q*float64(len(samples)))-1, 0)]
		got := h.quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/128+1 {
			t.Errorf("q%.3f: got %d, exact %d: want at most 1/128 above", q, got, exact)
		}
	}
	if h.quantile(1) != samples[len(samples)-1] {
		t.Errorf("max: got %d, want %d", h.quantile(1), samples[len(samples)-1])
	}
}

func TestMerge(t *testing.T) {
	var a, b hist
	for v := uint64(1); v <= 100; v++ {
		a.record(v)
		b.record(v + 1000)
	}
	a.merge(&b)
	if a.n != 200 || a.quantile(0.5) != 100 || a.quantile(1) != 1100 {
		t.Fatalf("merged: n=%d p50=%d max=%d, want 200, 100, 1100", a.n, a.quantile(0.5), a.quantile(1))
	}
}

func TestEmptyHistogram(t *testing.T) {
	var h hist
	if h.quantile(0.99) != 0 {
		t.Fatal("an empty histogram reports a latency")
	}
}
