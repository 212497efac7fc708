package router

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
)

// memShards spreads buckets over locks so that connections on different
// cores rarely wait for each other.
const memShards = 64

// minSweep is the smallest map size at which a shard looks for full buckets
// to forget.
const minSweep = 1024

// A shard that does not grow is swept on the clock too, so that the full
// buckets of a past flood of keys go even when no new key comes: at most
// every sweepEvery (µs) it is checked, and swept if sweepPerBucket µs per
// bucket it held have passed since its last sweep, which bounds what the
// scans cost, whatever the shard holds, to about 0.02% of a core. One
// decision sweeps one shard at most; while shards are due, the next is
// checked sweepEvery/memShards later.
const (
	sweepEvery     = 1_000_000
	sweepPerBucket = 100
)

// Memory keeps buckets in this process: the embedded backend when sluice
// runs without a cluster. It decides exactly as the Lua script does.
type Memory struct {
	now      func() int64 // µs since the epoch
	seed     maphash.Seed
	perShard int // most buckets a shard keeps; 0 means no cap
	// tick is when (µs) Decide next looks for shards due a sweep, from
	// shard sweepNext: the first shards, due again, must not starve the
	// others.
	tick      atomic.Int64
	sweepNext atomic.Uint32
	shards    [memShards]memShard
}

type memShard struct {
	mu      sync.Mutex       // guards tats, pinned, sweepAt and swept
	tats    map[string]int64 // bucket key -> TAT in ns; absent = full
	sweepAt int              // len(tats) at which full buckets are dropped
	// swept is the clock (µs) of the last sweep: a decision whose clock,
	// read before it waited for the lock, is older must not take a
	// bucket that sweep forgot for full, as it was not at its instant.
	swept int64
	// sweepBy is when (µs) the shard is swept even if it did not grow;
	// peak the most buckets its map held: a sweep that leaves a quarter
	// of that makes a new map, as Go's never shrinks.
	sweepBy int64
	peak    int
	// pinned are the keys reset by resetPinned since the last clear,
	// which start leaves alone; nil until one is.
	pinned map[string]struct{}
}

// NewMemory returns an empty in-process backend on the system clock.
// maxKeys caps the buckets it holds (0: no cap); past the cap it forgets
// arbitrary buckets, which then start full again: a flood of distinct keys
// costs bounded memory and, at worst, over-admits the keys it forgot. The
// cap is kept per shard (maxKeys/64, at least one): below 64 it holds up
// to 64.
func NewMemory(maxKeys int) *Memory {
	return newMemory(func() int64 { return time.Now().UnixMicro() }, maxKeys)
}

func newMemory(now func() int64, maxKeys int) *Memory {
	m := &Memory{now: now, seed: maphash.MakeSeed()}
	if maxKeys > 0 {
		m.perShard = max(maxKeys/memShards, 1)
	}
	for i := range m.shards {
		m.shards[i].tats = make(map[string]int64)
		m.shards[i].sweepAt = m.sweepAt(0)
	}
	return m
}

// sweepAt is the size at which a shard holding n buckets sweeps next:
// twice n, so that sweeping costs in proportion to the writes, but never
// past the cap.
func (m *Memory) sweepAt(n int) int {
	at := max(2*n, minSweep)
	if m.perShard > 0 {
		at = min(at, m.perShard)
	}
	return at
}

// Decide decides reqs in order; it never fails.
func (m *Memory) Decide(_ context.Context, reqs []Request, res []Result) {
	now := m.now()
	for i := range reqs {
		res[i] = m.decide(&reqs[i], now)
		res[i].Source = SourceEmbedded
	}
	if t := m.tick.Load(); now >= t && m.tick.CompareAndSwap(t, now+sweepEvery) && m.sweepDue(now) {
		// This caller paid for one shard's scan, not for every bucket
		// held (its event loop's clients wait meanwhile): the shards
		// still due go to the next decisions.
		m.tick.CompareAndSwap(now+sweepEvery, now+sweepEvery/memShards)
	}
}

// sweepDue sweeps the next shard whose time has come, and reports whether
// there was one.
func (m *Memory) sweepDue(now int64) bool {
	from := m.sweepNext.Load()
	for j := range uint32(memShards) {
		i := (from + j) % memShards
		s := &m.shards[i]
		s.mu.Lock()
		due := len(s.tats) > 0 && now >= s.sweepBy && now >= s.swept
		if due {
			s.sweep(now, m.perShard, "")
			s.afterSweep(now, m)
		}
		s.mu.Unlock()
		if due {
			m.sweepNext.Store(i + 1)
			return true
		}
	}
	return false
}

// Submit is Decide for callers that take decisions asynchronously: the
// buckets are in this process, so done is called before it returns.
func (m *Memory) Submit(ctx context.Context, reqs []Request, res []Result, done func([]int)) {
	m.Decide(ctx, reqs, res)
	done(nil)
}

// Len is the number of buckets held, full ones not yet swept included,
// and those reset by resetPinned among them: the cluster releases its
// fallback buckets only while it holds some, and a pinned one left past
// the outage would keep the next outage's bucket from starting where
// the cluster left it.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.tats)
		for k := range s.pinned {
			if _, ok := s.tats[k]; !ok {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

func (m *Memory) decide(r *Request, now int64) Result {
	s := &m.shards[maphash.String(m.seed, r.Key)%memShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if now < s.swept {
		// Read before a sweep by a later clock: read it again, now
		// that nothing can sweep.
		now = m.now()
	}
	tat, ok := s.tats[r.Key]
	if r.Op == Reset {
		delete(s.tats, r.Key)
		return Result{Existed: ok && tat > now*1000}
	}
	br, store := bucket.Take(tat, now, r.Interval, r.Cost)
	if store != 0 {
		s.tats[r.Key] = store
		s.peak = max(s.peak, len(s.tats))
		if len(s.tats) >= s.sweepAt {
			s.sweep(now, m.perShard, r.Key)
			s.afterSweep(now, m)
		}
	}
	return Result{Result: br}
}

// settle forgets the buckets that are full at now (µs), keeps the others
// until they are, and ends resetPinned's pins; a map left mostly empty
// lets go of its memory. Called again and again, it sweeps each shard at
// the pace a decision would (sweepBy), not at each call.
func (m *Memory) settle(now int64) {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		if len(s.tats) > 0 && now >= s.sweepBy {
			s.sweep(now, 0, "")
			s.afterSweep(now, m)
		}
		s.pinned = nil
		s.mu.Unlock()
	}
}

// start sets key's bucket to be full at tat (ns), unless this process
// holds it emptier already, or reset it by resetPinned: a fallback bucket
// that starts where the cluster left it.
func (m *Memory) start(key string, tat int64) {
	s := &m.shards[maphash.String(m.seed, key)%memShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pinned[key]; ok {
		return
	}
	if old, ok := s.tats[key]; !ok || old < tat {
		s.tats[key] = tat
	}
}

// forget drops key's bucket, which starts full again.
func (m *Memory) forget(key string) {
	s := &m.shards[maphash.String(m.seed, key)%memShards]
	s.mu.Lock()
	delete(s.tats, key)
	s.mu.Unlock()
}

// resetPinned resets key's bucket as a Reset does, and keeps start from
// setting it until settle: a reset this instance answered must not be
// undone by a start from what it saw of the cluster before.
func (m *Memory) resetPinned(key string, now int64) Result {
	s := &m.shards[maphash.String(m.seed, key)%memShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pinned == nil {
		s.pinned = make(map[string]struct{})
	}
	s.pinned[key] = struct{}{}
	tat, ok := s.tats[key]
	delete(s.tats, key)
	return Result{Existed: ok && tat > now*1000}
}

// afterSweep sets when s sweeps next, and lets go of the memory of a map
// the sweep left mostly empty.
func (s *memShard) afterSweep(now int64, m *Memory) {
	n := len(s.tats)
	s.swept = now
	s.sweepAt = m.sweepAt(n)
	s.sweepBy = now + max(sweepEvery, int64(n)*sweepPerBucket)
	if s.peak > minSweep && n < s.peak/4 {
		tats := make(map[string]int64, n)
		for k, tat := range s.tats {
			tats[k] = tat
		}
		s.tats, s.peak = tats, n
	}
}

// sweep forgets full buckets (they equal missing ones), like Redis expiring
// them. When the shard is still at its limit, it also forgets a quarter of
// the rest, arbitrarily (map order): a cheap stand-in for LRU that only a
// flood of distinct keys ever reaches. It never forgets keep, the bucket
// just taken from: forgotten, it would be full again for the next call.
func (s *memShard) sweep(now int64, limit int, keep string) {
	for k, tat := range s.tats {
		if tat <= now*1000 {
			delete(s.tats, k)
		}
	}
	if limit == 0 || len(s.tats) < limit {
		return
	}
	for k := range s.tats {
		if len(s.tats) <= max(limit*3/4, 1) {
			break
		}
		if k != keep {
			delete(s.tats, k)
		}
	}
}
