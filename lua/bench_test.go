package lua_test

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// BenchmarkScriptOnRedis measures what a step costs the shard, on a
// one-node cluster: server-µs/bucket is the time Redis spent in EVALSHA
// (INFO commandstats), per bucket decided. "declared" is one bucket per
// call with KEYS[1]; "many-m" m buckets per call. Every step takes a token
// from one of 100,000 buckets, so it writes, as most steps do.
func BenchmarkScriptOnRedis(b *testing.B) {
	c := clustertest.New(b, clustertest.Config{Primaries: 1, Replicas: -1})
	node := c.Nodes[0]
	th := lua.NewThrottle()
	iv, err := bucket.Limit{Capacity: 100, Refill: 10, Period: 1_000_000}.Interval()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, m := range []int{0, 1, 4, 16, 64} {
		name := "declared"
		if m > 0 {
			name = "many-" + strconv.Itoa(m)
		}
		b.Run(name, func(b *testing.B) {
			conn, err := net.Dial("tcp", node.Addr)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			calls := make([]lua.Call, max(m, 1))
			out := make([]lua.Outcome, len(calls))
			rng := rand.New(rand.NewPCG(1, uint64(m)))
			var req, buf []byte
			chunk := make([]byte, 64<<10)
			roundTrip := func(depth int, decode func([]byte) (int, error)) {
				if _, err := conn.Write(req); err != nil {
					b.Fatal(err)
				}
				for range depth {
					for {
						n, err := decode(buf)
						if err != nil {
							b.Fatal(err)
						}
						if n > 0 {
							buf = buf[n:]
							break
						}
						k, err := conn.Read(chunk)
						if err != nil {
							b.Fatal(err)
						}
						buf = append(buf, chunk[:k]...)
					}
				}
			}
			decode := func(p []byte) (int, error) { return lua.DecodeMany(p, out) }
			if m == 0 {
				decode = func(p []byte) (int, error) { return lua.DecodeOne(p, &out[0]) }
			}
			fill := func() {
				for i := range calls {
					calls[i] = lua.Call{Key: "bench:" + strconv.Itoa(rng.IntN(100_000)), Interval: iv, Cost: 1}
				}
			}
			// Loaded with EVAL, so that every call after is an EVALSHA.
			fill()
			req = th.AppendManyEval(req[:0], calls)
			roundTrip(1, func(p []byte) (int, error) { return lua.DecodeMany(p, out) })
			if err := node.Do(ctx, "CONFIG", "RESETSTAT").Error(); err != nil {
				b.Fatal(err)
			}
			const depth = 16 // pipelined, as a proxy's connection would be
			b.ResetTimer()
			for done := 0; done < b.N; done += depth {
				req = req[:0]
				for range min(depth, b.N-done) {
					fill()
					if m == 0 {
						req = th.AppendOne(req, calls[0])
					} else {
						req = th.AppendMany(req, calls)
					}
				}
				roundTrip(min(depth, b.N-done), decode)
			}
			b.StopTimer()
			stats, err := node.Do(ctx, "INFO", "commandstats").ToString()
			if err != nil {
				b.Fatal(err)
			}
			_, line, _ := strings.Cut(stats, "cmdstat_evalsha:")
			_, usec, _ := strings.Cut(line, "usec=")
			usec, _, _ = strings.Cut(usec, ",")
			total, _ := strconv.ParseFloat(usec, 64)
			b.ReportMetric(total/float64(b.N*len(calls)), "server-µs/bucket")
		})
	}
}
