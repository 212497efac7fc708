package router_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// hotCluster starts a cluster shaped by cfg, a minute's context and a
// client of the cluster for looking at what sluice stored.
func hotCluster(t *testing.T, cfg clustertest.Config) (*clustertest.Cluster, context.Context, rueidis.Client) {
	t.Helper()
	c := clustertest.New(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, ctx, cl
}

// marker is the split marker stored for key, if any.
func marker(ctx context.Context, cl rueidis.Client, key string) (lua.Split, bool) {
	v, err := cl.Do(ctx, cl.B().Get().Key(router.KeyPrefix+key).Build()).ToString()
	if err != nil {
		return lua.Split{}, false
	}
	return lua.Marker(v)
}

// waitFor calls f every 10ms until it holds, failing the test if d passes.
var waitFor = router.PollFor

// tally is what a hammer saw.
type tally struct {
	calls, allowed, errors atomic.Int64
	fallback               atomic.Int64 // decisions not made by the cluster
	fallbackAllowed        atomic.Int64 // of allowed, those fallback made
	first, last            atomic.Int64 // ns of the first and last call
	firstErr               atomic.Value
}

// span is the time between the first call and the last, in seconds.
func (s *tally) span() float64 { return float64(s.last.Load()-s.first.Load()) / 1e9 }

// runFor waits until the load has gone on for d more: its calls, not the
// clock, say so, and a load that stalls fails the test.
func (s *tally) runFor(t *testing.T, d time.Duration) {
	t.Helper()
	until := time.Now().Add(d).UnixNano()
	waitFor(t, d+10*time.Second, fmt.Sprintf("%v more of load", d), func() bool { return s.last.Load() >= until })
}

// hammer has workers goroutines decide key through the routers in turn
// until stop is closed, each waiting pace between calls.
func hammer(rs []*router.Cluster, key string, iv bucket.Interval, workers int, pace time.Duration, stop <-chan struct{}, s *tally) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		r := rs[w%len(rs)]
		wg.Go(func() {
			for i := 0; i < 10_000_000; i++ { // bounded; stop ends it long before
				select {
				case <-stop:
					return
				default:
				}
				now := time.Now().UnixNano()
				s.first.CompareAndSwap(0, now)
				res := decide(r, key, iv)
				s.last.Store(time.Now().UnixNano())
				s.calls.Add(1)
				switch {
				case res.Err != nil:
					s.errors.Add(1)
					s.firstErr.CompareAndSwap(nil, res.Err.Error())
				case !res.Limited:
					s.allowed.Add(1)
				}
				if res.Err == nil && res.Source != router.SourceCluster {
					s.fallback.Add(1)
					if !res.Limited {
						s.fallbackAllowed.Add(1)
					}
				}
				if pace > 0 {
					time.Sleep(pace)
				}
			}
		})
	}
	return &wg
}

// stats is a router's state, for checks and failure messages.
func stats(r *router.Cluster) *router.ClusterStats { return r.Stats().Cluster }

// shardStats is the state of the shard at addr.
func shardStats(t *testing.T, r *router.Cluster, addr string) router.ShardStats {
	t.Helper()
	for _, s := range stats(r).Shards {
		if s.Addr == addr {
			return s
		}
	}
	t.Fatalf("no shard %s in %+v", addr, stats(r).Shards)
	return router.ShardStats{}
}

// checkSpread fails t unless the sub-buckets named by tags sit on
// distinct primaries, one per primary.
func checkSpread(t *testing.T, ctx context.Context, c *clustertest.Cluster, cl rueidis.Client, key string, sp lua.Split, primaries int) {
	t.Helper()
	if len(sp.Tags) != primaries {
		t.Fatalf("split into %d sub-buckets (%v), want one per primary: %d", len(sp.Tags), sp.Tags, primaries)
	}
	seen := map[string]string{}
	for i := range sp.Tags {
		sub := sp.SubKey(i, key)
		sl, err := cl.Do(ctx, cl.B().ClusterKeyslot().Key(sub).Build()).AsInt64()
		if err != nil || int(sl) != slot.Of(sub) {
			t.Fatalf("CLUSTER KEYSLOT %s: %d (%v), want %d", sub, sl, err, slot.Of(sub))
		}
		p, err := c.Primary(ctx, int(sl))
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := seen[p.Addr]; dup {
			t.Fatalf("sub-buckets %s and %s share primary %s", other, sub, p.Addr)
		}
		seen[p.Addr] = sub
	}
}

// A declared hot key is split over every primary, its sub-buckets decide,
// and after a resharding moves a sub-bucket's slot the split moves to a
// tag on the primary left without one.
func TestHotKeySplitFollowsTopology(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"tenant:*"}, HotCooldown: 600 * time.Millisecond})
	waitConnected(t, r)
	const key = "tenant:big"
	iv := interval(t, 1000, 1000, 1_000_000)
	stop := make(chan struct{})
	var s tally
	wg := hammer([]*router.Cluster{r}, key, iv, 2, 2*time.Millisecond, stop, &s)
	defer func() { close(stop); wg.Wait() }()

	var sp lua.Split
	waitFor(t, 2*time.Second, "split marker", func() bool {
		var ok bool
		sp, ok = marker(ctx, cl, key)
		return ok
	})
	checkSpread(t, ctx, c, cl, key, sp, 3)
	waitFor(t, 2*time.Second, "decisions by sub-buckets", func() bool { return stats(r).Split > 0 })
	if st := stats(r); st.HotKeys != 1 || len(st.Hot) != 1 || st.Hot[0].Key != "tenant:big" || st.Hot[0].State != "declared" || st.Hot[0].SubBuckets != 3 {
		t.Fatalf("the stats do not list the hot key: %+v", st.Hot)
	}
	for i := range sp.Tags {
		sub := sp.SubKey(i, key)
		waitFor(t, 2*time.Second, sub+" in use", func() bool {
			n, _ := cl.Do(ctx, cl.B().Exists().Key(sub).Build()).AsInt64()
			return n == 1
		})
	}

	// Move the first sub-bucket's slot to the second one's primary: the
	// split closes and the next one takes a tag on the primary left
	// without one.
	sl := slot.Of("{" + sp.Tags[0] + "}")
	to, err := c.Primary(ctx, slot.Of("{"+sp.Tags[1]+"}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MoveSlot(ctx, sl, to); err != nil {
		t.Fatal(err)
	}
	var moved lua.Split
	waitFor(t, 5*time.Second, "split re-tagged after the resharding", func() bool {
		var ok bool
		moved, ok = marker(ctx, cl, key)
		return ok && moved.Tags[0] != sp.Tags[0]
	})
	if moved.Gen == sp.Gen {
		t.Fatalf("re-tagged split kept its name %s: it would share sub-buckets with the old one", sp.Gen)
	}
	checkSpread(t, ctx, c, cl, key, moved, 3)
	if n := s.errors.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed, the first with %v", n, s.calls.Load(), s.firstErr.Load())
	}
}

// Two instances share one split: one finds the key hot and splits it, the
// other has detection off and follows the marker from its first call on
// the parent. Together they admit the key's limit, give or take one
// sub-bucket: were the marker ignored, the follower would count in a
// bucket of its own.
func TestHotKeyTwoInstancesShareOneSplit(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	// No faults here: a step late on the busy machine must not put a
	// sub-bucket on its stand-in, whose carried state may admit more.
	a := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: 300, Timeout: time.Second})
	b := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1, Timeout: time.Second})
	waitConnected(t, a)
	waitConnected(t, b)
	const capacity, refill = 60, 200 // per second
	iv := interval(t, capacity, refill, 1_000_000)
	const key = "login"
	stop := make(chan struct{})
	var s tally
	wg := hammer([]*router.Cluster{a, b}, key, iv, 8, 0, stop, &s)
	waitFor(t, 5*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, key); return ok })
	s.runFor(t, 2*time.Second)
	close(stop)
	wg.Wait()

	if n := s.errors.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed, the first with %v", n, s.calls.Load(), s.firstErr.Load())
	}
	if n := stats(b).Split; n == 0 {
		t.Fatalf("the follower made no decision by sub-bucket: %+v", *stats(b))
	}
	// Most denials of the overload are made from the last one, without a
	// step; the admitted count below shows they deny nothing Redis would
	// have allowed.
	if n := stats(a).DeniedHere + stats(b).DeniedHere; n < s.calls.Load()/2 {
		t.Fatalf("%d of %d calls denied without a step, want most", n, s.calls.Load())
	}
	ideal := capacity + refill*s.span()
	got := float64(s.allowed.Load())
	sub := float64(capacity) / 3
	t.Logf("admitted %.0f of %d calls, ideal %.1f over %.2fs: %.3fx", got, s.calls.Load(), ideal, s.span(), got/ideal)
	if got < 0.95*ideal || got > ideal+sub+3 {
		t.Fatalf("admitted %.0f, want within [%.1f, %.1f]", got, 0.95*ideal, ideal+sub+3)
	}
	if rate := float64(s.calls.Load()) / s.span(); rate < 5*refill {
		t.Fatalf("only %.0f calls/s: not the overload this test needs", rate)
	}
}

// While one key is hammered, each primary runs its share of the key's
// bucket steps: 1/3 each when split over 3 primaries, all of them on one
// when the key is not hot. The steps are counted once the split is in
// place: until the background loop makes it (README: 0.15-0.33 s after
// the load begins, later on a busy machine) every step is the parent's,
// and a window that took them in gave the parent's primary 0.53 of the
// steps on a loaded machine.
func TestHotKeySpreadsTheShards(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	primaries := c.Nodes[:3]
	steps := func() []int64 {
		out := make([]int64, len(primaries))
		for i, n := range primaries {
			info, err := n.Do(ctx, "INFO", "commandstats").ToString()
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(info, "\r\n") {
				if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
					n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
					out[i] += n
				}
			}
		}
		return out
	}
	// share hammers key through r and counts the steps from when ready
	// holds.
	share := func(r *router.Cluster, key string, ready func() bool) (float64, []int64) {
		stop := make(chan struct{})
		var s tally
		wg := hammer([]*router.Cluster{r}, key, interval(t, 100000, 100000, 1_000_000), 4, 0, stop, &s)
		waitFor(t, 5*time.Second, key+" ready", ready)
		for _, n := range primaries {
			if err := n.Do(ctx, "CONFIG", "RESETSTAT").Error(); err != nil {
				t.Fatal(err)
			}
		}
		s.runFor(t, 1500*time.Millisecond)
		close(stop)
		wg.Wait()
		per := steps()
		var sum, most int64
		for _, n := range per {
			sum += n
			most = max(most, n)
		}
		return float64(most) / float64(sum), per
	}
	plain := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
	waitConnected(t, plain)
	if got, per := share(plain, "plain", func() bool { return true }); got < 0.9 {
		t.Fatalf("an unsplit key: the busiest primary ran %.2f of the steps %v, want nearly all", got, per)
	}
	plain.Close()
	split := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"hot"}})
	waitConnected(t, split)
	// The marker is written before the router reads its reply: the calls
	// it sent to the parent meanwhile are a batch or two.
	got, per := share(split, "hot", func() bool { _, ok := marker(ctx, cl, "hot"); return ok })
	t.Logf("split over 3 primaries: busiest primary ran %.3f of the steps %v", got, per)
	if got > 1.0/3+0.1 {
		t.Fatalf("the busiest primary ran %.2f of the steps %v, want at most 1/3 + 0.1", got, per)
	}
}

// A key that cools returns to one bucket that starts where its
// sub-buckets were, not full: over the whole run it admits its limit give
// or take a sixth of a capacity. A bucket restarted full would add a whole
// capacity; one restarted where the sub-buckets were at the last renewal,
// not at the lapse, a third (the refill over the marker's 300ms).
func TestHotKeyCoolsWithoutBurst(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	core, logs := observer.New(zap.InfoLevel)
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: 300, HotCooldown: 300 * time.Millisecond, Logger: zap.New(core)})
	waitConnected(t, r)
	const capacity, refill = 90, 100 // per second
	iv := interval(t, capacity, refill, 1_000_000)
	const key = "cooling"
	var s tally
	// Hot: well over the threshold until split.
	stop := make(chan struct{})
	wg := hammer([]*router.Cluster{r}, key, iv, 4, 0, stop, &s)
	waitFor(t, 5*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, key); return ok })
	s.runFor(t, 500*time.Millisecond) // hot for a while
	close(stop)
	wg.Wait()
	// Cooling: 8 workers every 40ms, at most 200/s: under the threshold,
	// over the refill, so the bucket stays empty while it cools. (Many
	// workers, long pauses: a call slowed by a loaded machine lowers the
	// rate little, where 2 workers every 10ms could fall under the
	// refill and leave tokens unclaimed, short of the ideal.)
	stop = make(chan struct{})
	wg = hammer([]*router.Cluster{r}, key, iv, 8, 40*time.Millisecond, stop, &s)
	waitFor(t, 10*time.Second, "one bucket again", func() bool {
		v, err := cl.Do(ctx, cl.B().Get().Key(router.KeyPrefix+key).Build()).ToString()
		return err == nil && len(v) == 19
	})
	s.runFor(t, 500*time.Millisecond) // some time as one bucket
	close(stop)
	wg.Wait()
	if n := s.errors.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed, the first with %v", n, s.calls.Load(), s.firstErr.Load())
	}
	for _, msg := range []string{"hot key split", "hot key cooled: one bucket again when its split lapses"} {
		if n := logs.FilterMessage(msg).FilterField(zap.String("key", key)).Len(); n != 1 {
			t.Errorf("%d log lines %q, want one", n, msg)
		}
	}
	ideal := capacity + refill*s.span()
	got := float64(s.allowed.Load())
	t.Logf("admitted %.0f, ideal %.1f over %.2fs: %.3fx", got, ideal, s.span(), got/ideal)
	if got > ideal+capacity/6 || got < 0.95*ideal {
		t.Fatalf("admitted %.0f, want within [%.1f, %.1f]", got, 0.95*ideal, ideal+capacity/6)
	}
}

// When a sub-bucket's shard hangs, its calls go to the siblings on
// healthy shards: the key stays decided in the cluster, without errors.
func TestHotKeySiblingsCoverAHungShard(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	// Not the 100ms of the fault tests: under -race on a loaded machine
	// a healthy shard's first call was seen to take 260ms, and one past
	// the timeout blames the parent's shard for no hang.
	// A hung shard is blamed whatever the timeout. Not longer: a
	// slot-map read that meets the hung node holds up the split's
	// renewal for 4x it, and the renewal is due a second before the
	// split lapses.
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"api"}, Timeout: 300 * time.Millisecond})
	waitConnected(t, r)
	const key = "api"
	iv := interval(t, 100000, 100000, 1_000_000)
	decide(r, key, iv)
	var sp lua.Split
	waitFor(t, 2*time.Second, "split marker", func() bool {
		var ok bool
		sp, ok = marker(ctx, cl, key)
		return ok
	})
	parent, err := c.Primary(ctx, slot.Of(router.KeyPrefix+key))
	if err != nil {
		t.Fatal(err)
	}
	var victim *clustertest.Node
	for _, tag := range sp.Tags {
		if p, _ := c.Primary(ctx, slot.Of("{"+tag+"}")); p != nil && p != parent {
			victim = p
			break
		}
	}
	if victim == nil {
		t.Fatalf("no sub-bucket of %v off the parent's primary", sp.Tags)
	}
	before := r.Decisions(router.SourceLocal) + r.Decisions(router.SourceOpen) + r.Decisions(router.SourceClosed)
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	// Past the split's first 2s, so that it is renewed while the shard
	// hangs: the renewal must neither fail nor blame the parent's shard.
	start := time.Now()
	for i := 0; time.Since(start) < 2500*time.Millisecond && i < 1_000_000; i++ {
		res := decide(r, key, iv)
		if res.Err != nil || res.Source != router.SourceCluster || res.Limited {
			t.Fatalf("call %d with %s hung: got %+v, want a cluster decision\n%+v", i, victim.Addr, res, *stats(r))
		}
	}
	after := r.Decisions(router.SourceLocal) + r.Decisions(router.SourceOpen) + r.Decisions(router.SourceClosed)
	if after != before {
		t.Fatalf("%d decisions went to fallback", after-before)
	}
	if v, p := shardStats(t, r, victim.Addr), shardStats(t, r, parent.Addr); v.Healthy || !p.Healthy || p.Errors != 0 {
		t.Fatalf("want the hung shard unhealthy and the parent's never blamed: %+v, %+v", v, p)
	}
}

// Calls of different costs on one split key share one set of
// sub-buckets: a call costing more than a sub-bucket holds is denied, and
// together they never admit more than the capacity plus one sub-bucket.
func TestHotKeyMixedCosts(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"mixed"}, HotSplit: 6})
	waitConnected(t, r)
	iv := interval(t, 60, 1, 3600_000_000)
	peek := make([]router.Result, 1)
	router.SubmitAndWait(r, ctx, []router.Request{{Key: "mixed", Interval: iv, Cost: 0}}, peek)
	waitFor(t, 2*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, "mixed"); return ok })
	tokens := int64(0)
	for _, cost := range append([]int64{30, 30}, slices.Repeat([]int64{1}, 100)...) {
		res := make([]router.Result, 1)
		router.SubmitAndWait(r, ctx, []router.Request{{Key: "mixed", Interval: iv, Cost: cost}}, res)
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		if !res[0].Limited {
			tokens += cost
		}
	}
	if tokens > 60+10 {
		t.Fatalf("admitted %d tokens of a 60-token bucket split in 6, want at most 70", tokens)
	}
	// The split closes and the next one has room for a call of 30.
	waitFor(t, 6*time.Second, "a split in 2", func() bool {
		decide(r, "mixed", iv)
		sp, ok := marker(ctx, cl, "mixed")
		return ok && len(sp.Tags) == 2
	})
}

// A split ended by an instance that has gone quiet, while another keeps
// draining the sub-buckets, lapses into a bucket as empty as they are:
// the quiet instance's view of them is not what counts.
func TestHotKeyLapsesIntoWhatOthersLeft(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	a := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"drained"}, HotCooldown: 600 * time.Millisecond})
	b := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
	waitConnected(t, a)
	waitConnected(t, b)
	iv := interval(t, 60, 1, 3600_000_000)
	decide(a, "drained", iv)
	waitFor(t, 2*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, "drained"); return ok })
	admitted := int64(1)
	deadline := time.Now().Add(10 * time.Second)
	for lapsed := false; !lapsed; {
		if time.Now().After(deadline) {
			t.Fatal("the split did not lapse within 10s")
		}
		if res := decide(b, "drained", iv); res.Err != nil {
			t.Fatal(res.Err)
		} else if !res.Limited {
			admitted++
		}
		v, err := cl.Do(ctx, cl.B().Get().Key(router.KeyPrefix+"drained").Build()).ToString()
		lapsed = err == nil && len(v) == 19
		time.Sleep(2 * time.Millisecond)
	}
	for range 100 {
		if res := decide(b, "drained", iv); !res.Limited {
			admitted++
		}
	}
	if admitted > 60+20 {
		t.Fatalf("admitted %d of a 60-token bucket across a split and its lapse, want at most 80", admitted)
	}
}

// THROTTLE.RESET on a split key deletes its sub-buckets with the marker:
// the key is full again at once, not after the split lapses.
func TestHotKeyReset(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"reset"}})
	waitConnected(t, r)
	iv := interval(t, 30, 1, 3600_000_000)
	decide(r, "reset", iv)
	var sp lua.Split
	waitFor(t, 2*time.Second, "split marker", func() bool {
		var ok bool
		sp, ok = marker(ctx, cl, "reset")
		return ok
	})
	for range 20 {
		decide(r, "reset", iv)
	}
	subs := []string{sp.SubKey(0, "reset"), sp.SubKey(1, "reset"), sp.SubKey(2, "reset")}
	for _, k := range subs {
		if n, err := cl.Do(ctx, cl.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 1 {
			t.Fatalf("sub-bucket %s not in use before the reset (%v)", k, err)
		}
	}
	res := make([]router.Result, 1)
	router.SubmitAndWait(r, ctx, []router.Request{{Op: router.Reset, Key: "reset"}}, res)
	if res[0].Err != nil || !res[0].Existed {
		t.Fatalf("reset: got %+v, want an existing bucket deleted", res[0])
	}
	for _, k := range append(subs, router.KeyPrefix+"reset") {
		if n, err := cl.Do(ctx, cl.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
			t.Fatalf("%s still exists after the reset (%v)", k, err)
		}
	}
	if got := decide(r, "reset", iv); got.Err != nil || got.Limited || got.Remaining != 29 {
		t.Fatalf("after the reset: got %+v, want a full bucket less one token", got)
	}
}

// Two instances that both renew a split but want different sub-buckets
// (one has seen a call too big for the split) never count the key in two
// sets at once: the split closes, lapses and is split again, and the key
// admits its limit plus at most one sub-bucket.
func TestHotKeyRenewersThatDisagree(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	a := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: 300})
	b := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: 300})
	waitConnected(t, a)
	waitConnected(t, b)
	const capacity, refill = 60, 200 // per second
	iv := interval(t, capacity, refill, 1_000_000)
	const key = "disputed"
	stop := make(chan struct{})
	var s tally
	wg := hammer([]*router.Cluster{a, b}, key, iv, 8, 0, stop, &s)
	waitFor(t, 5*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, key); return ok })
	// One call of 30 through a: a wants 2 sub-buckets from now on, b 3.
	big := make([]router.Result, 1)
	router.SubmitAndWait(a, ctx, []router.Request{{Key: key, Interval: iv, Cost: 30}}, big)
	if !big[0].Limited && big[0].Source == router.SourceCluster {
		s.allowed.Add(30)
	}
	s.runFor(t, 3*time.Second)
	close(stop)
	wg.Wait()
	if n := s.errors.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed, the first with %v", n, s.calls.Load(), s.firstErr.Load())
	}
	// What is checked is what the cluster admitted. On a loaded machine a
	// shard can be slow past the timeout, and the calls that fall back
	// meanwhile are admitted by each instance's own bucket, by design;
	// the cluster, not asked then, may then admit less than its share.
	ideal := capacity + refill*s.span()
	got := float64(s.allowed.Load() - s.fallbackAllowed.Load())
	fallback := s.fallback.Load()
	t.Logf("the cluster admitted %.0f, ideal %.1f over %.2fs: %.3fx (%d calls decided by the fallback)", got, ideal, s.span(), got/ideal, fallback)
	if got > ideal+capacity/3+3 || (fallback == 0 && got < 0.9*ideal) {
		t.Fatalf("the cluster admitted %.0f, want within [%.1f, %.1f] (%d calls decided by the fallback)", got, 0.9*ideal, ideal+capacity/3+3, fallback)
	}
}

// Instances started with different --hot-split share the split the first
// of them made: the others renew it as it is, with its number of
// sub-buckets, and never close it to make one of their own.
func TestHotKeyInstancesWithDifferentSplitsAgree(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	three := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"agreed"}, HotSplit: 3})
	two := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"agreed"}, HotSplit: 2})
	waitConnected(t, three)
	waitConnected(t, two)
	iv := interval(t, 1000, 1000, 1_000_000)
	decide(three, "agreed", iv)
	var first lua.Split
	waitFor(t, 2*time.Second, "split marker", func() bool {
		var ok bool
		first, ok = marker(ctx, cl, "agreed")
		return ok
	})
	if len(first.Tags) != 3 {
		t.Fatalf("split %+v, want the 3 sub-buckets of the instance that made it", first)
	}
	stop := make(chan struct{})
	var s tally
	wg := hammer([]*router.Cluster{three, two}, "agreed", iv, 4, time.Millisecond, stop, &s)
	defer func() { close(stop); wg.Wait() }()
	// Past two renewals by each: the 2s marker is renewed after 1s.
	until := time.Now().Add(2500 * time.Millisecond)
	for i := 0; time.Now().Before(until) && i < 10_000; i++ {
		v, err := cl.Do(ctx, cl.B().Get().Key(router.KeyPrefix+"agreed").Build()).ToString()
		sp, ok := lua.Marker(v)
		if err != nil || !ok || sp.Gen != first.Gen || strings.HasSuffix(v, "!") {
			t.Fatalf("marker %q (%v), want split %s as made, not closing", v, err, first.Gen)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := stats(two); len(st.Hot) != 1 || st.Hot[0].SubBuckets != 3 {
		t.Fatalf("the instance with --hot-split 2 uses %+v, want the 3 sub-buckets", st.Hot)
	}
	if n := s.errors.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed, the first with %v", n, s.calls.Load(), s.firstErr.Load())
	}
}

// A split key hammered through one and through three instances while the
// primary that holds its parent bucket is killed: the instances keep
// deciding it in the cluster (the sub-buckets on healthy primaries, and a
// stand-in for the one on the dead primary) for the whole outage, take the
// same split up again once the replica is promoted, and admit the key's
// limit within one sub-bucket. An instance that never saw the split
// decides by fallback meanwhile.
func TestHotKeySplitOutlivesItsParentsOutage(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d instances", n), func(t *testing.T) { testSplitOutage(t, n) })
	}
}

func testSplitOutage(t *testing.T, n int) {
	c, ctx, cl := hotCluster(t, clustertest.Config{PartialCoverage: true})
	victim := c.Nodes[0]
	key := keysIn(1, 0, 5460, "tenant:")[0] // its bucket on the victim
	// The first instance splits the key; the others only follow it.
	var rs []*router.Cluster
	for i := range n {
		cfg := router.ClusterConfig{HotThreshold: -1}
		if i == 0 {
			cfg.HotKeys = []string{key}
		}
		rs = append(rs, newRouter(t, c.Addrs(), cfg))
	}
	stranger := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
	for _, r := range append(rs, stranger) {
		waitConnected(t, r)
	}
	const capacity, refill = 60, 200 // per second
	iv := interval(t, capacity, refill, 1_000_000)
	stop := make(chan struct{})
	var s tally
	wg := hammer(rs, key, iv, 8, 0, stop, &s)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}()
	var before lua.Split
	waitFor(t, 5*time.Second, "split marker", func() bool {
		var ok bool
		before, ok = marker(ctx, cl, key)
		return ok
	})
	waitFor(t, 5*time.Second, "every instance deciding by sub-bucket", func() bool {
		return !slices.ContainsFunc(rs, func(r *router.Cluster) bool { return stats(r).Split == 0 })
	})
	s.runFor(t, 300*time.Millisecond) // overloaded: the key is empty now

	calls0, fallback0, allowed0 := s.calls.Load(), s.fallback.Load(), s.allowed.Load()
	killed := time.Now()
	victim.Kill()
	if res := decide(stranger, key, iv); res.Err != nil || res.Source != router.SourceLocal {
		t.Errorf("an instance that never saw the split: got %+v during the outage, want a local fallback decision", res)
	}
	promoted := waitPrimaryChange(t, c, slot.Of(router.KeyPrefix+key), victim)
	calls1, fallback1 := s.calls.Load(), s.fallback.Load()
	waitFor(t, 5*time.Second, "the split taken up by every instance", func() bool {
		for _, r := range rs {
			if st := stats(r); len(st.Hot) != 1 || st.Hot[0].Held || st.Hot[0].SplitLeft == 0 {
				return false
			}
		}
		return true
	})
	s.runFor(t, 500*time.Millisecond) // and on, in the cluster again
	close(stop)
	wg.Wait()
	ended := time.Now()

	if n := s.errors.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed, the first with %v", n, s.calls.Load(), s.firstErr.Load())
	}
	share := float64(fallback1-fallback0) / float64(calls1-calls0)
	t.Logf("promoted %v after the kill; %d of %d decisions by fallback before it (%.1f%%)",
		promoted.Sub(killed).Round(time.Millisecond), fallback1-fallback0, calls1-calls0, 100*share)
	if share > 0.10 {
		t.Errorf("%.1f%% of the key's decisions were fallback before the promotion, want <= 10%%", 100*share)
	}
	after, ok := marker(ctx, cl, key)
	if !ok || after.Gen != before.Gen {
		t.Errorf("split %+v after the outage, want %s taken up: one set of sub-buckets throughout", after, before.Gen)
	}
	ideal := refill * ended.Sub(killed).Seconds()
	got := float64(s.allowed.Load() - allowed0)
	sub := float64(capacity) / 3
	t.Logf("admitted %.0f from the kill on, ideal %.1f over %.2fs: %.3fx", got, ideal, ended.Sub(killed).Seconds(), got/ideal)
	// The aim is one sub-bucket over; the bound is two so that a
	// loaded machine does not fail make test. What passes one: instances'
	// views of a sub-bucket differ by their last few milliseconds of calls
	// (the first to move it carries its own), and a stand-in started by an
	// instance that never decided that sub-bucket starts from the split's
	// base. Measured on an idle machine: 1.00 to 1.03x, at most half a
	// sub-bucket over.
	if most := ideal + 2*sub + 3; got < 0.95*ideal || got > most {
		t.Errorf("admitted %.0f from the kill on, want within [%.1f, %.1f]", got, 0.95*ideal, most)
	}
}

// A split whose maker stops before its first renewal lapses into the
// bucket as it was at the split as of the lapse, not as it was at the
// split: the sub-buckets spent the refill meanwhile, and a bucket that
// regained it at the lapse would admit it twice.
func TestHotKeyUnrenewedSplitLapsesWithoutBurst(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	maker := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"orphan"}, HotThreshold: -1})
	other := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
	waitConnected(t, maker)
	waitConnected(t, other)
	const capacity, refill = 100, 50 // per second: 2s from empty to full
	iv := interval(t, capacity, refill, 1_000_000)
	const key = "orphan"
	var s tally
	stop := make(chan struct{})
	wg := hammer([]*router.Cluster{other}, key, iv, 2, time.Millisecond, stop, &s)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}()
	s.runFor(t, 200*time.Millisecond) // the key is empty now
	decide(maker, key, iv)
	waitFor(t, 2*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, key); return ok })
	maker.Close() // before it renews the split
	waitFor(t, 5*time.Second, "one bucket again", func() bool {
		v, err := cl.Do(ctx, cl.B().Get().Key(router.KeyPrefix+key).Build()).ToString()
		return err == nil && len(v) == 19
	})
	s.runFor(t, 500*time.Millisecond)
	close(stop)
	wg.Wait()
	if n := s.errors.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed, the first with %v", n, s.calls.Load(), s.firstErr.Load())
	}
	ideal := capacity + refill*s.span()
	got := float64(s.allowed.Load())
	t.Logf("admitted %.0f, ideal %.1f over %.2fs: %.3fx", got, ideal, s.span(), got/ideal)
	if got > ideal+capacity/3+3 {
		t.Fatalf("admitted %.0f, want at most %.1f", got, ideal+capacity/3+3)
	}
}

// A split used unevenly keeps the tokens no call took: a renewal's base
// (where a sub-bucket never taken from starts) is the fullest
// sub-bucket's state, not the mean, which made those sub-buckets as empty
// as the mean and, renewal after renewal, spent tokens of them (10 of the
// 20 left here were lost). The bucket it lapses into holds the mean.
func TestHotKeyUnevenSplitKeepsItsTokens(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	const key = "uneven"
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{key}, HotCooldown: 600 * time.Millisecond})
	waitConnected(t, r)
	iv := interval(t, 30, 30, 3600_000_000) // 30 an hour: nothing refills meanwhile
	if res := decide(r, key, iv); res.Err != nil || res.Limited {
		t.Fatalf("the first call: %+v", res)
	}
	waitFor(t, 2*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, key); return ok })
	res := make([]router.Result, 1)
	router.SubmitAndWait(r, ctx, []router.Request{{Key: key, Interval: iv, Cost: 9}}, res) // on one sub-bucket
	if res[0].Err != nil || res[0].Limited {
		t.Fatalf("a call of 9 on the split: %+v", res[0])
	}
	// Renewed, cooled, ended (its tags closed with "!"), lapsed.
	waitFor(t, 10*time.Second, "the split ended and lapsed", func() bool {
		v, err := cl.Do(ctx, cl.B().Get().Key(router.KeyPrefix+key).Build()).ToString()
		f := strings.Split(v, ":")
		if err != nil || len(f) != 5 || !strings.HasSuffix(f[4], "!") {
			return false
		}
		until, err := strconv.ParseInt(f[1], 10, 64) // ms, on the shard's clock: this machine's
		return err == nil && time.Now().UnixMilli() > until
	})
	router.SubmitAndWait(r, ctx, []router.Request{{Key: key, Interval: iv, Cost: 0}}, res)
	// 30 - 1 - 9, less up to a token per sub-bucket that a split rounds.
	if got := res[0].Remaining; res[0].Err != nil || got > 20 || got < 17 {
		t.Fatalf("after the split lapsed: %d remaining (%v), want 20 less up to 3", got, res[0].Err)
	}
}
