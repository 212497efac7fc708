// Package hotkey estimates, in fixed memory, how often each key is seen over a
// sliding window, so that the few keys carrying most of the traffic can be
// spotted on the hot path without a map that grows with the key space.
//
// It is a count-min sketch per window: a key's count is the smallest of the
// rows' counters it hashes to, so other keys can only inflate it, by about
// their traffic divided by the row width. The rate blends the current window
// with the previous one, weighted by how much of the previous one still lies
// inside a window-long span ending now.
package hotkey

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

const (
	rows  = 4  // independent guesses per key; the smallest is the least inflated
	bits  = 11 // each row takes its own 11 bits of the key's 64-bit hash
	width = 1 << bits
	mask  = width - 1

	// none is the window number of a sketch that holds no window: never
	// used yet, or being cleared.
	none = math.MinInt64
)

// Counter estimates per-key rates in 64 KiB whatever the number of keys.
// A key's estimate never falls below its true count in a window, except for
// counts made with a clock two windows behind the newest one seen. Counter is
// safe for concurrent use; the zero value is not usable, call New.
type Counter struct {
	seed   maphash.Seed // random per Counter, so no client can choose keys that share all four counters
	window int64        // in ns
	perNs  float64      // 1/window: the fraction of a window that one ns is
	perSec float64      // windows per second: turns a count per window into a rate

	mu sync.Mutex // guards clearing a sketch, so that one goroutine does it and the others wait

	// held[i] is the window number whose counts sketch[i] holds, or none.
	// Window e lives in sketch[e&1], so the current and the previous window
	// are never in the same sketch.
	held [2]atomic.Int64

	_ [64]byte // keeps the words above, read by every call, off the counters' cache lines

	sketch [2][rows][width]atomic.Uint32
}

// New returns a Counter whose rates are measured over window (e.g. time.Second); window <= 0 means 1s.
func New(window time.Duration) *Counter {
	if window <= 0 {
		window = time.Second
	}
	c := &Counter{
		seed:   maphash.MakeSeed(),
		window: int64(window),
		perNs:  1 / float64(window),
		perSec: float64(time.Second) / float64(window),
	}
	c.held[0].Store(none)
	c.held[1].Store(none)
	return c
}

// Add counts one occurrence of key at now (ns on any monotonic-enough clock, e.g. time.Now().UnixNano())
// and returns the key's estimated rate per second over the last window, this occurrence included.
func (c *Counter) Add(key string, now int64) float64 {
	e, frac := c.at(now)
	i := e & 1
	if c.held[i].Load() != e && !c.rotate(i, e) {
		// now is older than the window sketch[i] has moved on to: there
		// is nowhere left to count it.
		return c.Rate(key, now)
	}
	h := maphash.String(c.seed, key)
	s := &c.sketch[i]
	n := min(
		s[0][h&mask].Add(1),
		s[1][h>>bits&mask].Add(1),
		s[2][h>>(2*bits)&mask].Add(1),
		s[3][h>>(3*bits)&mask].Add(1),
	)
	return c.rate(n, c.count(h, e-1), frac)
}

// Rate is key's estimated rate per second at now, without counting.
func (c *Counter) Rate(key string, now int64) float64 {
	e, frac := c.at(now)
	h := maphash.String(c.seed, key)
	return c.rate(c.count(h, e), c.count(h, e-1), frac)
}

// at splits now into its window number and the fraction of that window
// already gone, rounding down also for clocks that read below zero.
func (c *Counter) at(now int64) (e int64, frac float64) {
	e = now / c.window
	off := now - e*c.window
	if off < 0 {
		e--
		off += c.window
	}
	return e, float64(off) * c.perNs
}

// rate assumes the previous window's occurrences were evenly spread, so the
// part of it still inside the last window-long span is 1-frac of them.
func (c *Counter) rate(cur, prev uint32, frac float64) float64 {
	return (float64(cur) + float64(prev)*(1-frac)) * c.perSec
}

// count is h's count in window e, or 0 when no sketch holds e, which is how
// a sketch left over from an older window reads as empty without a writer.
func (c *Counter) count(h uint64, e int64) uint32 {
	held := &c.held[e&1]
	if held.Load() != e {
		return 0
	}
	s := &c.sketch[e&1]
	n := min(
		s[0][h&mask].Load(),
		s[1][h>>bits&mask].Load(),
		s[2][h>>(2*bits)&mask].Load(),
		s[3][h>>(3*bits)&mask].Load(),
	)
	if held.Load() != e {
		return 0 // cleared for a newer window while we read: n may be torn
	}
	return n
}

// rotate makes sketch i hold window e, clearing it if it holds an older
// one, and reports whether it now does; false means it already holds a
// newer window. While it clears, held[i] reads none, so readers of the old
// window drop what they read and Adds for e wait here instead of counting
// into counters about to be zeroed.
func (c *Counter) rotate(i, e int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if held := c.held[i].Load(); held >= e {
		return held == e
	}
	c.held[i].Store(none)
	for r := range c.sketch[i] {
		for j := range c.sketch[i][r] {
			c.sketch[i][r][j].Store(0)
		}
	}
	c.held[i].Store(e)
	return true
}
