package router

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
)

// memShards spreads buckets over locks so that connections on different
// cores rarely wait for each other.
const memShards = 64

// minSweep is the smallest map size at which a shard looks for full buckets
// to forget.
const minSweep = 1024

// Memory keeps buckets in this process: the embedded backend when sluice
// runs without a cluster. It decides exactly as the Lua script does.
type Memory struct {
	now    func() int64 // µs since the epoch
	seed   maphash.Seed
	shards [memShards]memShard
}

type memShard struct {
	mu      sync.Mutex       // guards tats and sweepAt
	tats    map[string]int64 // bucket key -> TAT in ns; absent = full
	sweepAt int              // len(tats) at which full buckets are dropped
}

// NewMemory returns an empty in-process backend on the system clock.
func NewMemory() *Memory {
	return newMemory(func() int64 { return time.Now().UnixMicro() })
}

func newMemory(now func() int64) *Memory {
	m := &Memory{now: now, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].tats = make(map[string]int64)
		m.shards[i].sweepAt = minSweep
	}
	return m
}

// Decide decides reqs in order; it never fails.
func (m *Memory) Decide(_ context.Context, reqs []Request, res []Result) {
	now := m.now()
	for i := range reqs {
		res[i] = m.decide(&reqs[i], now)
	}
}

// Len is the number of buckets held, full ones not yet swept included.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.tats)
		s.mu.Unlock()
	}
	return n
}

func (m *Memory) decide(r *Request, now int64) Result {
	s := &m.shards[maphash.String(m.seed, r.Key)%memShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	tat, ok := s.tats[r.Key]
	if r.Op == Reset {
		delete(s.tats, r.Key)
		return Result{Existed: ok && tat > now*1000}
	}
	br, store := bucket.Take(tat, now, r.Interval, r.Cost)
	if store != 0 {
		s.tats[r.Key] = store
		if len(s.tats) >= s.sweepAt {
			s.sweep(now)
		}
	}
	return Result{Result: br}
}

// sweep forgets full buckets (they equal missing ones), like Redis expiring
// them, and sets the next sweep at twice what is left, so the cost of
// sweeping stays proportional to the writes.
func (s *memShard) sweep(now int64) {
	for k, tat := range s.tats {
		if tat <= now*1000 {
			delete(s.tats, k)
		}
	}
	s.sweepAt = max(2*len(s.tats), minSweep)
}
