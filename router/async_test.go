package router_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// serveWith serves d with the given loops (-1: a goroutine per client).
func serveWith(t *testing.T, d proxy.Decider, loops int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(proxy.Config{Decider: d, Backend: "cluster", Loops: loops})
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// single is a client of one sluice: a pipeline's replies come back in the
// order of its commands or not at all.
func single(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true,
		DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// The keys' shards answer in any order; a pipeline that mixes them with
// commands sluice answers itself still gets every reply in its place.
func TestPipelineOrderAcrossShards(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
	waitConnected(t, r)
	shards := [][]string{keysIn(50, 0, 5460, "a:"), keysIn(50, 5461, 10922, "b:"), keysIn(50, 10923, slot.Count-1, "c:")}
	for _, loops := range []int{1, -1} {
		t.Run(fmt.Sprintf("loops=%d", loops), func(t *testing.T) {
			addr := serveWith(t, r, loops)
			var wg sync.WaitGroup
			for w := range 4 {
				cl := single(t, addr)
				wg.Go(func() {
					for round := range 25 {
						var cmds rueidis.Commands
						var want []string
						for i := range 3 {
							tag := fmt.Sprintf("%d.%d.%d", w, round, i)
							cmds = append(cmds,
								cl.B().Ping().Build(),
								cl.B().Arbitrary("THROTTLE").Keys(shards[i][(w*25+round)%50]).Args("1000000", "1", "1s", "1").Build(),
								cl.B().Echo().Message(tag).Build(),
								cl.B().Info().Section("server").Build())
							want = append(want, "PONG", "THROTTLE", tag, "INFO")
						}
						for j, res := range cl.DoMulti(context.Background(), cmds...) {
							if err := checkReply(res, want[j]); err != nil {
								t.Errorf("worker %d round %d reply %d: %v", w, round, j, err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

func checkReply(res rueidis.RedisResult, want string) error {
	switch want {
	case "THROTTLE":
		v, err := res.AsIntSlice()
		if err != nil || len(v) != 5 || v[0] != 0 || v[1] != 1000000 {
			return fmt.Errorf("want a THROTTLE reply, got %v, %v", v, err)
		}
	case "INFO":
		s, err := res.ToString()
		if err != nil || !strings.Contains(s, "# Server") {
			return fmt.Errorf("want INFO server, got %.40q, %v", s, err)
		}
	default:
		if s, err := res.ToString(); err != nil || s != want {
			return fmt.Errorf("want %q, got %q, %v", want, s, err)
		}
	}
	return nil
}

// A primary that answers slowly, within the backend timeout, delays only
// its own keys: the decisions of the other shards, made in the same rounds
// of the same loop, are answered as soon as their shards answer.
func TestSlowShardDelaysOnlyItsKeys(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1, Timeout: time.Second})
	waitConnected(t, r)
	addr := serveWith(t, r, 1)
	slowKeys := keysIn(20, 0, 5460, "slow:")
	fastKeys := keysIn(20, 5461, slot.Count-1, "fast:")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	slowNode, err := c.Primary(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	sleeper := single(t, slowNode.Addr)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 600 { // bounded: about a minute at most
			select {
			case <-stop:
				return
			default:
			}
			// 100ms at a time: the slow keys' p50 is then tens of ms,
			// so that half of it stays far above what a loaded machine
			// adds to the other keys' calls.
			sleeper.Do(ctx, sleeper.B().Arbitrary("DEBUG", "SLEEP", "0.1").Build())
		}
	})
	defer func() { close(stop); wg.Wait() }()

	latencies := func(keys []string, n int, lat *[]time.Duration) {
		cl := single(t, addr)
		for i := range n {
			start := time.Now()
			if err := cl.Do(ctx, cl.B().Arbitrary("THROTTLE").Keys(keys[i%len(keys)]).Args("1000", "1", "1s").Build()).Error(); err != nil {
				t.Errorf("THROTTLE: %v", err)
				return
			}
			*lat = append(*lat, time.Since(start))
		}
	}
	var slow, fast []time.Duration
	var load sync.WaitGroup
	// A slow key's call waits out most of a sleep, so 20 of them span
	// 2 s, the other keys' 60 calls (which the check is about) a
	// fraction of that; more slow calls would only move their p50 less.
	load.Go(func() { latencies(slowKeys, 20, &slow) })
	load.Go(func() { latencies(fastKeys, 60, &fast) })
	load.Wait()
	slices.Sort(slow)
	slices.Sort(fast)
	slowP50, fastP90 := slow[len(slow)/2], fast[len(fast)*9/10]
	t.Logf("p50 of the slow shard's keys %v; p90 of the others' %v", slowP50, fastP90)
	if slowP50 < 10*time.Millisecond {
		t.Fatalf("the slow shard's keys took %v at p50: DEBUG SLEEP did not slow it", slowP50)
	}
	if fastP90 > slowP50/2 {
		t.Fatalf("the other shards' keys took %v at p90, against %v for the slow one's: they waited for it", fastP90, slowP50)
	}
	if n := r.Decisions(router.SourceLocal); n != 0 {
		t.Fatalf("%d decisions fell back: the slow shard was taken for a failed one", n)
	}
}

// One client pipelining 10,000 calls does not make a healthy shard look
// hung: sluice reads no more of it than its bound on commands in flight,
// so no call waits behind more than that many, and none falls back.
func TestLongPipelineKeepsShardsHealthy(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
	waitConnected(t, r)
	for _, loops := range []int{1, -1} {
		t.Run(fmt.Sprintf("loops=%d", loops), func(t *testing.T) {
			local, cluster := r.Decisions(router.SourceLocal), r.Decisions(router.SourceCluster)
			cl := single(t, serveWith(t, r, loops))
			cmds := make(rueidis.Commands, 10_000)
			for i := range cmds {
				cmds[i] = cl.B().Arbitrary("THROTTLE").Keys(fmt.Sprintf("long:%d", i)).Args("10", "1", "1s").Build()
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i, res := range cl.DoMulti(ctx, cmds...) {
				if v, err := res.AsIntSlice(); err != nil || len(v) != 5 || v[0] != 0 {
					t.Fatalf("call %d: %v, %v", i, v, err)
				}
			}
			if n := r.Decisions(router.SourceLocal) - local; n != 0 {
				t.Fatalf("%d of 10,000 decisions fell back: a healthy shard was marked unhealthy\n%+v", n, *stats(r))
			}
			if n := r.Decisions(router.SourceCluster) - cluster; n < 10_000 {
				t.Fatalf("%d decisions by the cluster, want 10,000", n)
			}
		})
	}
}

// A caller that goes away (a cancelled context: a server shutting down)
// is not a shard's fault: its calls are decided by fallback, and no shard
// is marked unhealthy or counted as failed.
func TestCancelledCallerIsNotAShardFault(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
	waitConnected(t, r)
	iv := interval(t, 100, 10, 1_000_000)
	var reqs []router.Request
	for _, k := range keysIn(30, 0, slot.Count-1, "gone:") {
		reqs = append(reqs, router.Request{Key: k, Interval: iv, Cost: 1})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := make([]router.Result, len(reqs))
	finished := make(chan struct{})
	go func() {
		router.SubmitAndWait(r, ctx, reqs, res)
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled caller's decisions never came back")
	}
	for i, re := range res {
		if re.Err != nil {
			t.Fatalf("request %d: %v", i, re.Err)
		}
	}
	for _, s := range stats(r).Shards {
		if !s.Healthy || s.Errors != 0 {
			t.Fatalf("a cancelled caller counted against shard %s: %+v", s.Addr, s)
		}
	}
}
