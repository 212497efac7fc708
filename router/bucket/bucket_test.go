package bucket_test

import (
	"errors"
	"math/big"
	"testing"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/bucket/buckettest"
)

func TestVectors(t *testing.T) {
	for _, c := range buckettest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			var tat int64
			for i, s := range c.Steps {
				iv, err := c.LimitAt(s).Interval()
				if err != nil {
					t.Fatal(err)
				}
				r, store := bucket.Take(tat, buckettest.Start+s.T, iv, s.Cost)
				if got := buckettest.Got(r); got != s.Want {
					t.Fatalf("step %d (t=%d cost=%d): got %v, want %v", i, s.T, s.Cost, got, s.Want)
				}
				if (store != 0) != (r.Limited == false && s.Cost > 0) {
					t.Fatalf("step %d: store=%d for limited=%v cost=%d: a denial or peek must write nothing", i, store, r.Limited, s.Cost)
				}
				if store != 0 {
					tat = store
				}
			}
		})
	}
}

func TestIntervalReduces(t *testing.T) {
	tests := []struct {
		l    bucket.Limit
		u, v int64
	}{
		{bucket.Limit{Capacity: 1, Refill: 1000000, Period: 1000000}, 1, 1},
		{bucket.Limit{Capacity: 1, Refill: 3, Period: 1000000}, 1000000, 3},
		{bucket.Limit{Capacity: 1, Refill: 30, Period: 60000000}, 2000000, 1},
		{bucket.Limit{Capacity: 1, Refill: 1000, Period: 3600000000}, 3600000, 1},
	}
	for _, tt := range tests {
		iv, err := tt.l.Interval()
		if err != nil || iv.U != tt.u || iv.V != tt.v {
			t.Errorf("%+v: got %d/%d (%v), want %d/%d", tt.l, iv.U, iv.V, err, tt.u, tt.v)
		}
	}
}

func TestIntervalOutOfRange(t *testing.T) {
	for _, l := range []bucket.Limit{
		{Capacity: 1 << 40, Refill: 1, Period: 1 << 20},
		{Capacity: 1, Refill: 1<<41 + 1, Period: 1000},
		{Capacity: 0, Refill: 1, Period: 1000},
		{Capacity: 1, Refill: 0, Period: 1000},
		{Capacity: 1, Refill: 1, Period: 0},
	} {
		if _, err := l.Interval(); !errors.Is(err, bucket.ErrOutOfRange) {
			t.Errorf("%+v: got %v, want ErrOutOfRange", l, err)
		}
	}
}

// A bucket stored under a slower limit is emptier than a faster limit's
// bucket can be; reading it under the faster limit must not overflow.
func TestDeficitCappedUnderNewLimit(t *testing.T) {
	slow, _ := bucket.Limit{Capacity: 1000, Refill: 1, Period: 86400000000}.Interval()
	fast, _ := bucket.Limit{Capacity: 2, Refill: 1 << 30, Period: 1000000}.Interval()
	now := int64(buckettest.Start)
	_, tat := bucket.Take(0, now, slow, 1000)
	r, _ := bucket.Take(tat, now, fast, 0)
	if r.Remaining != 0 || r.Limited {
		t.Fatalf("got %+v, want an empty bucket that a peek does not deny", r)
	}
	// Full again when the slow limit's 1000 tokens have refilled: the real
	// time, not the fast bucket's fill time.
	if want := int64(1000 * 86_400_000_000); r.ResetAfter != want {
		t.Fatalf("reset after %d µs, want %d", r.ResetAfter, want)
	}
}

// Over any run of requests, a bucket admits at most capacity plus what was
// refilled, and at least that minus one token when it is asked often enough.
func TestAdmitsExactlyTheRate(t *testing.T) {
	for _, l := range []bucket.Limit{
		{Capacity: 10, Refill: 3, Period: 1000000},
		{Capacity: 1, Refill: 7, Period: 60000000},
		{Capacity: 100, Refill: 1001, Period: 1000000},
	} {
		iv, err := l.Interval()
		if err != nil {
			t.Fatal(err)
		}
		var tat, admitted int64
		const span, step = 10_000_000, 97
		for dt := int64(0); dt <= span; dt += step {
			r, store := bucket.Take(tat, buckettest.Start+dt, iv, 1)
			if !r.Limited {
				admitted++
				tat = store
			}
		}
		ideal := l.Capacity + l.Refill*span/l.Period
		if admitted > ideal || admitted < ideal-1 {
			t.Errorf("%+v: admitted %d over %d µs, want %d (within one token below)", l, admitted, span, ideal)
		}
	}
}

func TestExpireAtIsTheFullInstant(t *testing.T) {
	iv, _ := bucket.Limit{Capacity: 3, Refill: 3, Period: 1000000}.Interval()
	now := int64(buckettest.Start) + 123
	_, tat := bucket.Take(0, now, iv, 1)
	at := buckettest.ExpireAt(tat)
	// Full again at now + 333333.33 µs: the key may go at the next ms, no
	// sooner.
	if at*1_000_000 < tat || at*1_000_000-tat >= 1_000_000 {
		t.Fatalf("expires at %d ms for a TAT of %d ns: want the next ms at or after it", at, tat)
	}
	if want := (now*1000 + 333_333_334 + 999_999) / 1_000_000; at != want {
		t.Fatalf("expires at %d ms, want %d", at, want)
	}
}

func BenchmarkTake(b *testing.B) {
	iv, _ := bucket.Limit{Capacity: 1000, Refill: 100, Period: 1000000}.Interval()
	b.ReportAllocs()
	var tat int64
	now := int64(buckettest.Start)
	for i := 0; b.Loop(); i++ {
		r, store := bucket.Take(tat, now+int64(i)*5000, iv, 1)
		if !r.Limited {
			tat = store
		}
	}
}

// After a slower limit emptied a bucket further than a faster limit can,
// the faster limit's replies count the real time until tokens are there.
func TestLimitChangeCountsRealTime(t *testing.T) {
	day, _ := bucket.Limit{Capacity: 1, Refill: 1, Period: 86_400_000_000}.Interval()
	fast, _ := bucket.Limit{Capacity: 1000, Refill: 1000, Period: 1_000_000}.Interval()
	now := int64(buckettest.Start)
	_, tat := bucket.Take(0, now, day, 1)
	r, store := bucket.Take(tat, now, fast, 1)
	// Full in a day; one token of the fast bucket (1 ms) is there 999 ms
	// before that.
	want := bucket.Result{Limited: true, Remaining: 0, RetryAfter: 86_400_000_000 - 999_000, ResetAfter: 86_400_000_000}
	if r != want || store != 0 {
		t.Fatalf("got %+v (store %d), want %+v", r, store, want)
	}
	// And the retry is honest: at that time the token is there.
	if r2, _ := bucket.Take(tat, now+r.RetryAfter, fast, 1); r2.Limited {
		t.Fatalf("still denied at the retry time: %+v", r2)
	}
	if r3, _ := bucket.Take(tat, now+r.RetryAfter-1, fast, 1); !r3.Limited {
		t.Fatalf("allowed 1 µs before the retry time: %+v", r3)
	}
	peek, _ := bucket.Take(tat, now, fast, 0)
	if peek.Limited || peek.Remaining != 0 || peek.ResetAfter != 86_400_000_000 {
		t.Fatalf("peek: got %+v", peek)
	}
}

func TestSplitSumsToTheWhole(t *testing.T) {
	for _, tc := range []struct {
		c, r, p int64
		n       int
		caps    []int64
	}{
		{7, 10, 1_000_000, 3, []int64{3, 2, 2}},
		{100, 3, 1_000_000, 3, []int64{34, 33, 33}},
		{5, 1, 86_400_000_000, 4, []int64{2, 1, 1, 1}},
		{16, 1000, 1_000, 16, []int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{9, 9, 1_000_000, 1, []int64{9}},
	} {
		iv, err := bucket.Limit{Capacity: tc.c, Refill: tc.r, Period: tc.p}.Interval()
		if err != nil {
			t.Fatal(err)
		}
		parts, err := iv.Split(tc.n)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		// Rates as exact fractions: sum of V_i/U_i must equal V/U.
		sum := new(big.Rat)
		for i, p := range parts {
			if p.Capacity != tc.caps[i] {
				t.Fatalf("%+v: part %d capacity got %d, want %d", tc, i, p.Capacity, tc.caps[i])
			}
			sum.Add(sum, big.NewRat(p.V, p.U))
			// Each part fills from empty in the whole's time: c*U_i/V_i = C*U/V.
			if a, b := big.NewRat(p.Capacity*p.U, p.V), big.NewRat(iv.Capacity*iv.U, iv.V); a.Cmp(b) != 0 {
				t.Fatalf("%+v: part %d fills in %v µs, want %v", tc, i, a, b)
			}
		}
		if want := big.NewRat(iv.V, iv.U); sum.Cmp(want) != 0 {
			t.Fatalf("%+v: rates sum to %v tokens/µs, want %v", tc, sum, want)
		}
	}
}

func TestSplitAdmitsAsTheWhole(t *testing.T) {
	iv, _ := bucket.Limit{Capacity: 7, Refill: 10, Period: 1_000_000}.Interval()
	parts, err := iv.Split(3)
	if err != nil {
		t.Fatal(err)
	}
	// Overload both for 10s of virtual time, one call every 100µs; the
	// parts are called round-robin, each one call in three.
	whole, split := 0, 0
	var tat int64
	tats := make([]int64, len(parts))
	for i := range 100_000 {
		now := buckettest.Start + int64(i)*100
		if r, store := bucket.Take(tat, now, iv, 1); !r.Limited {
			whole++
			tat = store
		}
		j := i % len(parts)
		if r, store := bucket.Take(tats[j], now, parts[j], 1); !r.Limited {
			split++
			tats[j] = store
		}
	}
	// 7 + 10/s over the 9.9999s between the first call and the last.
	if whole != 106 || split < whole-len(parts) || split > whole {
		t.Fatalf("admitted whole %d, split %d; want 106 and split within %d below it", whole, split, len(parts))
	}
}

func TestSplitOutOfRange(t *testing.T) {
	iv, _ := bucket.Limit{Capacity: 3, Refill: 1, Period: 1_000_000}.Interval()
	for _, n := range []int{0, 4} {
		if _, err := iv.Split(n); !errors.Is(err, bucket.ErrOutOfRange) {
			t.Fatalf("split in %d: got %v, want ErrOutOfRange", n, err)
		}
	}
	// At the edge of exactness: a part of 3 tokens of a 5-token bucket
	// refilled 2^40 per 7µs needs a denominator of 3 x 2^40.
	edge, err := bucket.Limit{Capacity: 5, Refill: 1 << 40, Period: 7}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := edge.Split(2); !errors.Is(err, bucket.ErrOutOfRange) {
		t.Fatalf("got %v, want ErrOutOfRange", err)
	}
}
