package router

import (
	"context"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/router/bucket/buckettest"
)

// The sweep on the clock runs inside a decision, on the caller's event
// loop: one decision that swept every shard at once scanned every bucket
// held (1M buckets: a 14 ms stall of every client of that loop, every
// 2 s). A decision sweeps at most one shard, and the next decisions the
// others in turn, so a past flood still goes within a few calls, even
// when the first shards are due again before the last is reached.
func TestReviewEmbeddedSweepsOneShardADecision(t *testing.T) {
	now := int64(buckettest.Start)
	m := newMemory(func() int64 { return now }, 0)
	second := interval(t, 10, 10, 1_000_000)
	day := interval(t, 10, 10, 86400_000_000)
	res := make([]Result, 1)
	const flood = memShards * 200
	for i := range flood {
		iv := second
		if i%10 == 0 {
			iv = day // still held after the flood: every shard keeps some
		}
		m.Decide(context.Background(), []Request{{Key: "flood:" + strconv.Itoa(i), Interval: iv, Cost: 1}}, res)
	}
	now += 3600_000_000 // the one-second buckets are full, every shard due
	few := []Request{{Key: "flood:0", Interval: day, Cost: 1}}
	m.Decide(context.Background(), few, res)
	if n := m.Len(); n < flood-2*flood/memShards {
		t.Fatalf("one decision swept %d of %d buckets: more than one shard's", flood-n, flood)
	}
	for range memShards {
		now += sweepEvery
		m.Decide(context.Background(), few, res)
	}
	if n := m.Len(); n > flood/10 {
		t.Fatalf("%d buckets held after %d decisions a second apart, %d not full", n, memShards+1, flood/10)
	}
}
