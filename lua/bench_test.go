package lua_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// BenchmarkScriptOnRedis measures what a step costs the shard, on a
// one-node cluster: server-µs/bucket is the time Redis spent in EVALSHA
// (INFO commandstats), per bucket decided. "declared" is one bucket per
// call with KEYS[1]; "many-m" m buckets per call. Every step takes a token
// from one of 100,000 buckets, so it writes, as most steps do, and most
// find their bucket full (its key gone); "/existing" from one of 100
// buckets of 10^9 tokens refilling 1,000 a second, each taken from about
// every 2 ms: never full, never empty.
func BenchmarkScriptOnRedis(b *testing.B) {
	c := clustertest.New(b, clustertest.Config{Primaries: 1, Replicas: -1})
	node := c.Nodes[0]
	th := lua.NewThrottle()
	iv, err := bucket.Limit{Capacity: 100, Refill: 10, Period: 1_000_000}.Interval()
	if err != nil {
		b.Fatal(err)
	}
	big, err := bucket.Limit{Capacity: 1_000_000_000, Refill: 1000, Period: 1_000_000}.Interval()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, run := range []struct {
		m    int
		keys int
	}{{0, 100_000}, {1, 100_000}, {4, 100_000}, {16, 100_000}, {64, 100_000}, {0, 100}, {16, 100}} {
		m := run.m
		name := "declared"
		if m > 0 {
			name = "many-" + strconv.Itoa(m)
		}
		iv := iv
		if run.keys == 100 {
			name += "/existing"
			iv = big
		}
		b.Run(name, func(b *testing.B) {
			cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{node.Addr}, ForceSingleClient: true, DisableCache: true})
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			// newStep returns one goroutine's step: m buckets (0: one,
			// declared) of 100,000, each taking a token.
			newStep := func(seed uint64) func() {
				calls := make([]lua.Call, max(m, 1))
				out := make([]lua.Outcome, len(calls))
				res, errs := make([]lua.Result, 1), make([]error, 1)
				rng := rand.New(rand.NewPCG(seed, uint64(m)))
				return func() {
					for i := range calls {
						calls[i] = lua.Call{Key: "bench:" + strconv.Itoa(rng.IntN(run.keys)), Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}
					}
					if m == 0 {
						th.Do(ctx, cl, calls, res, errs)
						if errs[0] != nil {
							b.Error(errs[0])
						}
						return
					}
					th.DoMany(ctx, cl, calls, out)
					if out[0].Err != nil {
						b.Error(out[0].Err)
					}
				}
			}
			newStep(0)() // loads the script, so that every call after is an EVALSHA
			if err := node.Do(ctx, "CONFIG", "RESETSTAT").Error(); err != nil {
				b.Fatal(err)
			}
			var seeds atomic.Uint64
			// Concurrent callers, pipelined by rueidis, as a proxy's would be.
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				step := newStep(seeds.Add(1))
				for pb.Next() {
					step()
				}
			})
			b.StopTimer()
			stats, err := node.Do(ctx, "INFO", "commandstats").ToString()
			if err != nil {
				b.Fatal(err)
			}
			_, line, _ := strings.Cut(stats, "cmdstat_evalsha:")
			_, usec, _ := strings.Cut(line, "usec=")
			usec, _, _ = strings.Cut(usec, ",")
			total, _ := strconv.ParseFloat(usec, 64)
			b.ReportMetric(total/float64(b.N*max(m, 1)), "server-µs/bucket")
		})
	}
}
