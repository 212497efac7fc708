package main

import (
	"math"
	"math/bits"
)

// subBits sets the histogram's precision: each power of two is split into
// 2^subBits buckets, so a recorded value is off by less than 1/128 (0.8%).
const subBits = 7

// hist is an HDR-style log-linear histogram of latencies in µs: constant
// memory and O(1) recording however many samples a run takes.
type hist struct {
	counts [64 << subBits]uint64
	n      uint64
	max    uint64
}

func (h *hist) record(us uint64) {
	h.counts[bucketOf(us)]++
	h.n++
	h.max = max(h.max, us)
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// bucketOf maps v to its bucket: values below 2^subBits have one bucket
// each; above, the bucket is the exponent and the top subBits bits below
// the leading one.
func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	exp := bits.Len64(v) - 1 - subBits
	return (exp+1)<<subBits | int(v>>exp)&(1<<subBits-1)
}

// bucketHigh is the largest value that falls in bucket b.
func bucketHigh(b int) uint64 {
	if b < 1<<subBits {
		return uint64(b)
	}
	exp := b>>subBits - 1
	low := (uint64(1)<<subBits | uint64(b&(1<<subBits-1))) << exp
	return low + (uint64(1) << exp) - 1
}

// quantile is the value at quantile q in [0, 1]: the upper edge of the
// bucket holding it, capped by the largest value recorded, so it never
// understates a latency.
func (h *hist) quantile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for b, c := range h.counts {
		if seen += c; seen >= rank {
			return min(bucketHigh(b), h.max)
		}
	}
	return h.max
}
