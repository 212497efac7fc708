// Package bucket is the token-bucket arithmetic shared by sluice's
// in-process buckets and, line for line, by the Lua script in package lua.
//
// The bucket is kept as a GCRA theoretical arrival time (TAT): the instant,
// in nanoseconds since the Unix epoch, at which the bucket will be full
// again. A missing bucket and a TAT in the past both mean "full", so an idle
// bucket needs no storage at all.
//
// All arithmetic is exact integer arithmetic. Time inside one step is
// measured in units of 1/V microsecond, where one token is U such units and
// U/V is the reduced fraction period/refill, so a rate such as 3 per second
// loses nothing to rounding. Only the stored TAT is rounded, up to the next
// nanosecond; reading it back rounds down, so the round trip is exact when
// V < 1000 (any limit whose period/refill reduces to such a fraction) and
// otherwise can delay a token by at most 1 ns per write, never admit early.
// Every intermediate value stays below 2^53 so that Lua's doubles compute
// exactly the same numbers as Go's int64.
package bucket

import (
	"errors"
	"math/bits"
)

// Limits keep every intermediate value of Take within 2^53 (see the
// package comment); they are generous for real limits: capacity 10^6
// refilled at 1,000 per hour is 2^41.7 (capacity x period/gcd(period,
// refill) in µs); capacity 10^5 at one per day is 2^52.9, out of range.
const (
	// MaxCapacityTime bounds capacity x (period/refill in µs) once
	// period/refill is reduced: the time, in 1/V µs, to fill the bucket.
	MaxCapacityTime = 1 << 51
	// MaxDenominator bounds refill/gcd(period µs, refill).
	MaxDenominator = 1 << 40
)

// ErrOutOfRange means the limit cannot be computed exactly.
var ErrOutOfRange = errors.New("bucket: capacity, refill and period out of range")

// Limit is a bucket's shape: Capacity tokens at most, Refill tokens added
// continuously over each Period microseconds.
type Limit struct {
	Capacity int64
	Refill   int64
	Period   int64 // µs
}

// Interval is one token's refill time as the reduced fraction U/V µs,
// checked against the limits that keep Take exact.
type Interval struct {
	Capacity int64
	U, V     int64
}

// Interval reduces l. Capacity, Refill and Period must be positive.
func (l Limit) Interval() (Interval, error) {
	if l.Capacity < 1 || l.Refill < 1 || l.Period < 1 {
		return Interval{}, ErrOutOfRange
	}
	g := gcd(l.Period, l.Refill)
	u, v := l.Period/g, l.Refill/g
	if v > MaxDenominator || u > MaxCapacityTime/l.Capacity {
		return Interval{}, ErrOutOfRange
	}
	return Interval{Capacity: l.Capacity, U: u, V: v}, nil
}

// Split divides iv into n buckets for one hot key: capacities C/n, the
// remainder spread one token each over the first ones, so they sum to C;
// and each refills at its share c/C of iv's rate, so the rates sum
// exactly to iv's and every part fills from empty in the same time as
// iv. Equally empty parts and their whole are full again at one instant,
// which is what lets sub-buckets start from their parent's stored state.
// n must be in [1, C].
func (iv Interval) Split(n int) ([]Interval, error) {
	if n < 1 || int64(n) > iv.Capacity {
		return nil, ErrOutOfRange
	}
	parts := make([]Interval, n)
	for i := range parts {
		c := iv.Capacity / int64(n)
		if int64(i) < iv.Capacity%int64(n) {
			c++
		}
		p, err := iv.part(c)
		if err != nil {
			return nil, err
		}
		parts[i] = p
	}
	return parts, nil
}

// part is the interval of capacity c at c/C of iv's rate: one token every
// U*C/(V*c) µs. U*C < 2^51 by iv's own limits; V*c needs a check.
func (iv Interval) part(c int64) (Interval, error) {
	if hi, lo := bits.Mul64(uint64(iv.V), uint64(c)); hi != 0 || lo >= 1<<63 {
		return Interval{}, ErrOutOfRange
	}
	u, v := iv.U*iv.Capacity, iv.V*c
	g := gcd(u, v)
	u, v = u/g, v/g
	if v > MaxDenominator || u > MaxCapacityTime/c {
		return Interval{}, ErrOutOfRange
	}
	return Interval{Capacity: c, U: u, V: v}, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Result is the outcome of one step. Times are in microseconds, rounded up.
type Result struct {
	Limited    bool
	Remaining  int64 // whole tokens left after the step
	RetryAfter int64 // until cost tokens are there; -1 when allowed or never possible
	ResetAfter int64 // until the bucket is full again; 0 when full
}

// Take tries to take cost tokens at now (µs since the epoch) from the bucket
// whose TAT is tat (ns; 0 or any past instant means full). It returns the
// result and the TAT to store; store is 0 when nothing must be written (a
// denial or a peek with cost 0).
func Take(tat, now int64, iv Interval, cost int64) (r Result, store int64) {
	tau := iv.Capacity * iv.U
	d, over := deficit(tat, now, iv.V, tau)
	// full is the time until the bucket is full again. A bucket emptier
	// than this limit's (left by another limit) has its deficit capped at
	// tau; over then measures it in µs instead.
	full := func(x int64) int64 {
		if over > 0 {
			return over
		}
		return ceilDiv(x, iv.V)
	}
	r.RetryAfter = -1
	if cost > iv.Capacity {
		r.Limited = true
		r.Remaining = (tau - d) / iv.U
		r.ResetAfter = full(d)
		return r, 0
	}
	nd := d + cost*iv.U
	if nd > tau {
		r.Limited = true
		r.Remaining = (tau - d) / iv.U
		if over > 0 {
			// Until the deficit is down to what leaves room for cost.
			r.RetryAfter = over - (tau-cost*iv.U)/iv.V
		} else {
			r.RetryAfter = ceilDiv(nd-tau, iv.V)
		}
		r.ResetAfter = full(d)
		return r, 0
	}
	r.Remaining = (tau - nd) / iv.U
	r.ResetAfter = full(nd) // over > 0 only for a peek: nothing taken
	if cost == 0 {
		return r, 0
	}
	return r, now*1000 + nanos(nd, iv.V)
}

// deficit is how far the bucket is from full at now, in 1/v µs, capped at
// tau (an empty bucket). It rounds down what nanos rounded up, so for
// v < 1000 a stored deficit reads back exactly; for larger v one write can
// cost up to a nanosecond, which never admits early. A bucket stored under
// another limit can be emptier than tau: then over is the time until it is
// full, in µs rounded up (0 otherwise).
func deficit(tat, now, v, tau int64) (d, over int64) {
	dns := tat - now*1000
	if dns <= 0 {
		return 0, 0
	}
	a, b := dns/1000, dns%1000
	if a > tau/v || a*v+b*v/1000 > tau {
		return tau, ceilDiv(dns, 1000)
	}
	return a*v + b*v/1000, 0
}

// nanos converts x units of 1/v µs to nanoseconds, rounded up.
func nanos(x, v int64) int64 {
	return x/v*1000 + ceilDiv(x%v*1000, v)
}

func ceilDiv(a, b int64) int64 {
	return (a + b - 1) / b
}
