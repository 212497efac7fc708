package router

import (
	"context"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// reviewLimit draws a limit as THROTTLE, CL.THROTTLE or GCRA would build
// it from random arguments, edges included (capacity 1, C*U at 2^51,
// V at 2^40, GCRA's rounded emission interval), or false when the
// arguments are out of range (both backends refuse those before
// deciding).
func reviewLimit(rng *rand.Rand) (bucket.Interval, bool) {
	pick := func(vs ...int64) int64 { return vs[rng.IntN(len(vs))] }
	var l bucket.Limit
	switch rng.IntN(3) {
	case 0: // THROTTLE key capacity refill period
		l = bucket.Limit{
			Capacity: pick(1, 2, 5, 60, 1000, 1<<20, 1<<51, 1+rng.Int64N(1000)),
			Refill:   pick(1, 3, 7, 999, 1000, 7777, 1<<40, 1<<40-87, 1+rng.Int64N(10000)),
			Period:   pick(1, 1000, 1_000_000, 86400_000_000, 1<<31, 1<<51, 1+rng.Int64N(1e9)),
		}
	case 1: // CL.THROTTLE key max_burst count period(s)
		l = bucket.Limit{
			Capacity: pick(0, 1, 4, 15, 1000, 1<<20) + 1,
			Refill:   pick(1, 3, 30, 7777, 1+rng.Int64N(100)),
			Period:   pick(1, 60, 86400, 1+rng.Int64N(1e6)) * 1_000_000,
		}
	default: // GCRA key max_burst tokens_per_period period
		period := []float64{0.5, 1e-6, 1e-7, 1, 60, 86400, 1.5, 1e9, 999999999999, rng.Float64() * 1000}[rng.IntN(10)]
		rate := pick(1, 3, 7, 10, 7777, 1_000_000, 1+rng.Int64N(1000))
		e := max(int64(float64(float64(period*1000000)/float64(rate))+0.5), 1)
		l = bucket.Limit{Capacity: pick(0, 1, 4, 9, 1000, 1<<20) + 1, Refill: 1, Period: e}
	}
	iv, err := l.Interval()
	return iv, err == nil
}

// The embedded backend (Memory) and throttle.lua's many-bucket call, the
// one the cluster's pipelines send, on one clock: every reply field and
// every stored TAT the same, over random limits as the three commands
// build them (keys reused under other limits), costs 0, 1, the capacity,
// above it and near int64's maximum, pipelines of several calls at one
// instant (a key repeated among them) and steps spaced from 0 µs to
// years.
func TestReviewEmbeddedMatchesScriptOnOneClock(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	node, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), ForceSingleClient: true, DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	tm, err := node.Do(ctx, node.B().Time().Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	// Virtual time ahead of the shard's: no key expires under a step.
	now := sec*1_000_000 + 600_000_000
	m := newMemory(func() int64 { return now }, 0)
	th := lua.NewThrottle()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	const nkeys = 5
	prefix := "{rv" + strconv.FormatUint(seed, 36) + "}:"
	var years int
	for n := range 600 {
		switch x := rng.IntN(100); {
		case x < 30:
		case x < 60:
			now += rng.Int64N(1000)
		case x < 85:
			now += rng.Int64N(10_000_000)
		case x < 98:
			now += rng.Int64N(86400_000_000 * 30)
		default:
			if years < 6 {
				years++
				now += (1 + rng.Int64N(10)) * 365 * 86400_000_000
			}
		}
		var reqs []Request
		for range 1 + rng.IntN(4) {
			iv, ok := reviewLimit(rng)
			if !ok {
				continue
			}
			var cost int64
			switch x := rng.IntN(10); {
			case x < 2:
				cost = 0
			case x < 5:
				cost = 1
			case x < 7:
				cost = 1 + rng.Int64N(iv.Capacity)
			case x < 8:
				cost = iv.Capacity
			case x < 9:
				cost = iv.Capacity + 1
			default:
				cost = math.MaxInt64 - rng.Int64N(2)
			}
			reqs = append(reqs, Request{Op: Take, Key: prefix + strconv.Itoa(rng.IntN(nkeys)), Interval: iv, Cost: cost})
		}
		if len(reqs) == 0 {
			continue
		}
		res := make([]Result, len(reqs))
		m.Decide(ctx, reqs, res)
		calls := make([]lua.Call, len(reqs))
		for i := range reqs {
			calls[i] = step(reqs[i].storedKey(), reqs[i].Interval, reqs[i].Cost)
			calls[i].Now = now
		}
		out := make([]lua.Outcome, len(calls))
		th.DoMany(ctx, node, calls, out)
		for i := range reqs {
			if out[i].Err != nil || bucket.Result(out[i].Result) != res[i].Result {
				t.Fatalf("step %d, now %d, %+v: embedded %+v, script %+v (%v)", n, now, reqs[i], res[i].Result, out[i].Result, out[i].Err)
			}
		}
		for k := range nkeys {
			key := prefix + strconv.Itoa(k)
			s := &m.shards[maphash.String(m.seed, key)%memShards]
			s.mu.Lock()
			tat, held := s.tats[key]
			s.mu.Unlock()
			got, err := node.Do(ctx, node.B().Get().Key(KeyPrefix+key).Build()).ToString()
			if err != nil && !rueidis.IsRedisNil(err) {
				t.Fatal(err)
			}
			// Memory forgets a full bucket; the shard keeps it to its PXAT.
			full := got == "" || got == "0" || len(got) == 19 && got <= strconv.FormatInt(now*1000, 10)
			if want := strconv.FormatInt(tat, 10); held && got != want || !held && !full {
				t.Fatalf("step %d, now %d: %s holds %q on the shard, %d (held %v) embedded", n, now, key, got, tat, held)
			}
		}
	}
}
