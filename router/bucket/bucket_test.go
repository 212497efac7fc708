package bucket_test

import (
	"errors"
	"testing"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/bucket/buckettest"
)

func TestVectors(t *testing.T) {
	for _, c := range buckettest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			iv, err := c.Limit().Interval()
			if err != nil {
				t.Fatal(err)
			}
			var tat int64
			for i, s := range c.Steps {
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
	at := bucket.ExpireAt(tat)
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
