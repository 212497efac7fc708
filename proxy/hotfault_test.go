package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// Faults under a split hot key whose calls are served by the event loops
// (Loops 0): its steps go on the loops' own bucket connections, batched
// per loop (router/hotvia.go), and each fault must still end in a
// THROTTLE reply for every call, and leave nothing of the key held by a
// loop: a batch never settled would keep every later call on the key, on
// that loop, from being sent.

// hotFaultTimeout is the router's backend timeout in these tests: short,
// so that a hung primary is found quickly, and not so short that a
// healthy one under -race is taken for hung.
const hotFaultTimeout = 150 * time.Millisecond

// hotLoops is the event loops serving the tests' clients, hotClients the
// clients pipelining on the key (spread over the loops).
const hotLoops, hotClients = 3, 6

// hotSetup is a cluster of three primaries without replicas (partial
// coverage: the others keep serving while one is down), a router on it
// with hot:* declared hot, a server on the event loops in front of it,
// and key split over the primaries.
type hotSetup struct {
	c    *clustertest.Cluster
	r    *router.Cluster
	cl   *goredis.Client
	key  string
	args []any
	ctx  context.Context
}

func newHotSetup(t *testing.T) *hotSetup {
	t.Helper()
	c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: hotFaultTimeout, HotKeys: []string{"hot:*"}, ProbeInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	h := &hotSetup{c: c, r: r, ctx: ctx, key: "hot:" + t.Name()}
	// The event loops, three of them (Loops 0 is one per two CPUs, a
	// single loop on a small machine): each loop holds its own batches of
	// the key.
	h.cl = newGoRedis(t, serveConfig(t, proxy.Config{Decider: r, Loops: hotLoops}))
	// Far more than the tests take: no call is denied, so every call is
	// a step on a sub-bucket (none is denied here from a last denial).
	// The slow refill keeps the sub-buckets stored (a bucket's key
	// expires once it is full again): a step shows on its node as a
	// change of its sub-bucket's state. A limit that three sub-buckets
	// share exactly (300M tokens, 1000/s each): one that cannot be split
	// exactly is decided whole on the first sub-bucket.
	h.args = []any{"THROTTLE", h.key, 900_000_000, 3000, 1}
	if v := throttle(t, h.cl, h.args...); v[0] != 0 {
		t.Fatalf("the first call: %v, want allowed", v)
	}
	waitUntil(t, "the declared hot key is split", func() bool { return subBuckets(h.r, h.key) >= 2 })
	return h
}

// subBuckets reads the key's split marker from its parent bucket and
// names its sub-buckets (README "Hot keys"), each with the primary that
// owns its slot.
func (h *hotSetup) subBuckets(t *testing.T) ([]string, []*clustertest.Node) {
	t.Helper()
	parent := router.KeyPrefix + h.key
	owner, err := h.c.Primary(h.ctx, slot.Of(parent))
	if err != nil {
		t.Fatal(err)
	}
	v, err := owner.Do(h.ctx, "GET", parent).ToString()
	if err != nil {
		t.Fatalf("GET %s: %v", parent, err)
	}
	sp, ok := lua.Marker(v)
	if !ok {
		t.Fatalf("%s holds %q, not a split marker", parent, v)
	}
	var keys []string
	var nodes []*clustertest.Node
	for i := range sp.Tags {
		k := sp.SubKey(i, h.key)
		n, err := h.c.Primary(h.ctx, slot.Of(k))
		if err != nil {
			t.Fatal(err)
		}
		keys, nodes = append(keys, k), append(nodes, n)
	}
	return keys, nodes
}

// victim is a primary holding one of the key's sub-buckets but not its
// parent (whose marker then stays renewable), with that sub-bucket's key.
func (h *hotSetup) victim(t *testing.T) (*clustertest.Node, string) {
	t.Helper()
	parent, err := h.c.Primary(h.ctx, slot.Of(router.KeyPrefix+h.key))
	if err != nil {
		t.Fatal(err)
	}
	keys, nodes := h.subBuckets(t)
	for i, n := range nodes {
		if n != parent {
			return n, keys[i]
		}
	}
	t.Fatalf("every sub-bucket of %q is on its parent's primary %s", h.key, parent.Addr)
	return nil, ""
}

// state is sub's state on node n ("": none; "error: ...": no answer).
func (h *hotSetup) state(n *clustertest.Node, sub string) string {
	v, err := n.Do(h.ctx, "GET", sub).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return "error: " + err.Error()
	}
	return v
}

// takenOn waits until the load's steps change sub's state on n: the
// key's calls are decided there.
func (h *hotSetup) takenOn(t *testing.T, what string, n *clustertest.Node, sub string) {
	t.Helper()
	from := h.state(n, sub)
	waitUntil(t, what, func() bool {
		s := h.state(n, sub)
		return s != from && s != "" && !strings.HasPrefix(s, "error: ")
	})
}

// shardHealthy is the router's view of the primary at addr.
func (h *hotSetup) shardHealthy(addr string) (healthy, known bool) {
	for _, s := range h.r.Stats().Cluster.Shards {
		if s.Addr == addr {
			return s.Healthy, true
		}
	}
	return false, false
}

// waitUnhealthy waits until the router takes n's shard as unhealthy.
func (h *hotSetup) waitUnhealthy(t *testing.T, n *clustertest.Node) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if ok, known := h.shardHealthy(n.Addr); known && !ok {
			return
		}
		if time.Now().After(deadline) {
			st := h.r.Stats().Cluster
			t.Fatalf("%s's shard not taken as unhealthy within 5 s; shards %+v, hot %+v, decisions %v, split %d, denied here %d", n.Addr, st.Shards, st.Hot, st.Decisions, st.Split, st.DeniedHere)
		}
	}
}

func (h *hotSetup) fallbacks() int64 {
	d := h.r.Stats().Cluster.Decisions
	return d[router.SourceLocal] + d[router.SourceOpen] + d[router.SourceClosed]
}

// hotLoad is clients pipelining THROTTLE on the key until stopped. Every
// pipeline must be answered within callWait, each call with a THROTTLE
// reply: a call never answered is a deadline error, counted as one.
type hotLoad struct {
	calls, errs atomic.Int64
	slowest     atomic.Int64 // ns: the longest a pipeline took
	firstErr    atomic.Value
	inFlight    int64 // calls sent and not yet counted, at most
	stop        chan struct{}
	wg          sync.WaitGroup
}

const callWait = 3 * time.Second

// pipeline sends n THROTTLE calls on h's key as one pipeline and reports
// how many were answered without error, and the first error.
func (h *hotSetup) pipeline(n int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	p := h.cl.Pipeline()
	cmds := make([]*goredis.Cmd, n)
	for j := range cmds {
		cmds[j] = p.Do(ctx, h.args...)
	}
	p.Exec(ctx)
	ok := 0
	var first error
	for _, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if err == nil && len(v) != 5 {
			err = fmt.Errorf("THROTTLE replied %v", v)
		}
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		ok++
	}
	return ok, first
}

func (h *hotSetup) load(clients, each int) *hotLoad {
	l := &hotLoad{stop: make(chan struct{}), inFlight: int64(clients * each)}
	for range clients {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				start := time.Now()
				ok, err := h.pipeline(each)
				storeMax(&l.slowest, int64(time.Since(start)))
				l.calls.Add(int64(each))
				if err != nil {
					l.errs.Add(int64(each - ok))
					l.firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	return l
}

// end stops the load and fails t if any call was not answered a THROTTLE
// reply.
func (l *hotLoad) end(t *testing.T) {
	t.Helper()
	select {
	case <-l.stop:
		return // ended already
	default:
		close(l.stop)
	}
	l.wg.Wait()
	t.Logf("%d calls, the slowest pipeline took %v", l.calls.Load(), time.Duration(l.slowest.Load()))
	if n := l.errs.Load(); n > 0 {
		t.Fatalf("%d of %d calls had no THROTTLE reply, the first: %v", n, l.calls.Load(), l.firstErr.Load())
	}
}

// progress waits until the load has made n more calls than now, failing
// t if calls stop being answered.
func (l *hotLoad) progress(t *testing.T, what string, n int64) {
	t.Helper()
	from := l.calls.Load()
	waitUntil(t, what, func() bool { return l.calls.Load() >= from+n || l.errs.Load() > 0 })
	if e := l.errs.Load(); e > 0 {
		t.Fatalf("%s: %d calls had no THROTTLE reply, the first: %v", what, e, l.firstErr.Load())
	}
}

// recovered checks that, once the shard at victim is healthy again, the
// key's calls are decided by the cluster again, the victim's sub-bucket
// among them: its state on victim changes under the load, and nothing
// goes to the fallback.
func (h *hotSetup) recovered(t *testing.T, l *hotLoad, victim *clustertest.Node, sub string) {
	t.Helper()
	waitUntil(t, "the shard is healthy again", func() bool {
		ok, _ := h.shardHealthy(victim.Addr)
		return ok
	})
	// Steps the node held while stopped ran as it went on: its state from
	// now on is the loops' steps sent since.
	h.takenOn(t, "the key's calls reach the sub-bucket on the recovered node", victim, sub)
	st := h.r.Stats().Cluster
	before, fb, split := st.Decisions[router.SourceCluster], h.fallbacks(), st.Split
	l.progress(t, "calls after the recovery", 400)
	after := h.r.Stats().Cluster
	if n := h.fallbacks() - fb; n > 0 {
		t.Fatalf("%d calls decided by the fallback after the shard recovered", n)
	}
	// The load counts a call once its pipeline is answered: up to
	// l.inFlight of the 400 were decided before the first reading.
	if want := 400 - l.inFlight; after.Decisions[router.SourceCluster]-before < want || after.Split-split < want {
		t.Fatalf("%d cluster decisions (%d by the split) while the load made 400 calls, want at least %d", after.Decisions[router.SourceCluster]-before, after.Split-split, want)
	}
}

// A primary holding one of a split hot key's sub-buckets hangs (SIGSTOP)
// while clients pipeline THROTTLE on the key through the event loops: the
// loops' steps on it time out, which marks the shard unhealthy, and every
// call still gets a THROTTLE reply (decided on the sub-bucket's stand-in,
// or by the fallback). Once it goes on, the key's calls are the
// cluster's again, on that sub-bucket too.
func TestHotKeyLoopsPausedPrimary(t *testing.T) {
	h := newHotSetup(t)
	victim, sub := h.victim(t)
	l := h.load(hotClients, 16)
	defer l.end(t)
	l.progress(t, "calls before the pause", 200)
	h.takenOn(t, "the key's calls reach the sub-bucket on the primary to pause", victim, sub)
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			victim.Resume()
		}
	}()
	h.waitUnhealthy(t, victim)
	l.progress(t, "calls while the primary is paused", 200)
	if ok, _ := h.shardHealthy(victim.Addr); ok {
		// Probed healthy while stopped: it cannot have answered.
		t.Fatal("the paused primary's shard was taken as healthy again")
	}
	resumed = true
	if err := victim.Resume(); err != nil {
		t.Fatal(err)
	}
	h.recovered(t, l, victim, sub)
	l.end(t)
}

// As TestHotKeyLoopsPausedPrimary, the primary killed (its connections
// reset, refused while down) and restarted (without the script, and
// refusing writes for a while as a rebooted primary does).
func TestHotKeyLoopsKilledPrimary(t *testing.T) {
	h := newHotSetup(t)
	victim, sub := h.victim(t)
	l := h.load(hotClients, 16)
	defer l.end(t)
	l.progress(t, "calls before the kill", 200)
	h.takenOn(t, "the key's calls reach the sub-bucket on the primary to kill", victim, sub)
	victim.Kill()
	h.waitUnhealthy(t, victim)
	l.progress(t, "calls while the primary is down", 200)
	if err := victim.Restart(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.recovered(t, l, victim, sub)
	l.end(t)
}

// The primaries forget their scripts (SCRIPT FLUSH) while a hot key is
// split: the loops' next steps are refused NOSCRIPT on their own
// connections, which load the script only when they connect, and are
// decided again on the goroutine path, which loads it. Every call is
// answered by the cluster, none by the fallback, and calls on the key keep
// being answered after: no loop is left holding a batch of the key as in
// flight.
func TestHotKeyLoopsScriptFlush(t *testing.T) {
	h := newHotSetup(t)
	primaries := h.c.Nodes[:3]
	noscript := func() int64 {
		var n int64
		for _, p := range primaries {
			info, err := p.Do(h.ctx, "INFO", "errorstats").ToString()
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(info) {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "errorstat_NOSCRIPT:count="); ok {
					var k int64
					fmt.Sscan(v, &k)
					n += k
				}
			}
		}
		return n
	}
	// Warm every loop's connections to the primaries: their scripts are
	// loaded before the flush, not by a dial after it.
	for range 20 {
		if ok, err := h.pipeline(16); err != nil {
			t.Fatalf("%d of 16 calls answered before the flush, then: %v", ok, err)
		}
	}
	st := h.r.Stats().Cluster
	before, fb, refused := st.Decisions[router.SourceCluster], h.fallbacks(), noscript()
	for _, p := range primaries {
		if err := p.Do(h.ctx, "SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatal(err)
		}
	}
	l := h.load(hotClients, 16)
	defer l.end(t)
	waitUntil(t, "a step refused NOSCRIPT", func() bool { return noscript() > refused || l.errs.Load() > 0 })
	l.progress(t, "calls after the flush", 400)
	l.end(t)
	// Sequential rounds after the load: each loop's batches of the key all
	// settled, or these would wait for them forever (callWait).
	for i := range 20 {
		if ok, err := h.pipeline(16); err != nil {
			t.Fatalf("round %d after the flush: %d of 16 answered, then: %v", i, ok, err)
		}
	}
	st = h.r.Stats().Cluster
	if n := h.fallbacks() - fb; n > 0 {
		t.Fatalf("%d calls decided by the fallback after the scripts were flushed (shards: %+v)", n, st.Shards)
	}
	calls := l.calls.Load() + 20*16
	if got := st.Decisions[router.SourceCluster] - before; got < calls {
		t.Fatalf("%d cluster decisions for %d calls after the flush", got, calls)
	}
}

// The slot of one of a split hot key's sub-buckets is resharded while
// clients pipeline THROTTLE on the key through the event loops: first
// half-way (the sub-bucket migrated, the old owner answering the loops'
// steps on it "not local", as it does a script's undeclared key while the
// slot is MIGRATING: decided again where ASK is followed), then to the
// end (the loops' slot map is behind: MOVED). Every call is answered,
// by the cluster, and the sub-bucket goes on being taken from on its new
// primary.
func TestHotKeyLoopsSubBucketMigrates(t *testing.T) {
	h := newHotSetup(t)
	from, sub := h.victim(t)
	to := h.c.Nodes[0]
	if to == from {
		to = h.c.Nodes[1]
	}
	sl := slot.Of(sub)
	l := h.load(hotClients, 16)
	defer l.end(t)
	l.progress(t, "calls before the move", 200)
	h.takenOn(t, "the key's calls reach the sub-bucket to move", from, sub)
	fb := h.fallbacks()
	if _, err := h.c.StartMove(h.ctx, sl, to); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Migrate(h.ctx, from, to, sub); err != nil {
		t.Fatal(err)
	}
	// gone: the old owner has no sub-bucket (it answers ASK for a key of
	// a MIGRATING slot it does not hold).
	gone := func() (bool, error) {
		n, err := from.Do(h.ctx, "EXISTS", sub).AsInt64()
		if err != nil && strings.HasPrefix(err.Error(), "ASK ") {
			return true, nil
		}
		return n == 0, err
	}
	if ok, err := gone(); !ok {
		t.Fatalf("%s on the old owner after MIGRATE (%v)", sub, err)
	}
	l.progress(t, "calls while the sub-bucket's slot is half moved", 200)
	if ok, err := gone(); !ok {
		// A step run on the old owner would have made it anew there: the
		// sub-bucket would be two buckets.
		t.Fatalf("%s on the old owner during the move (%v)", sub, err)
	}
	if err := h.c.MoveSlot(h.ctx, sl, to); err != nil {
		t.Fatal(err)
	}
	if s := h.state(to, sub); s == "" || strings.HasPrefix(s, "error: ") {
		t.Fatalf("GET %s on its new primary: %q", sub, s)
	}
	// Before the split, whose sub-buckets are no longer one a primary,
	// lapses (README "A split never changes while it holds").
	h.takenOn(t, "the sub-bucket taken from on its new primary", to, sub)
	st := h.r.Stats().Cluster
	before := st.Decisions[router.SourceCluster]
	l.progress(t, "calls after the move", 400)
	if got, want := h.r.Stats().Cluster.Decisions[router.SourceCluster]-before, 400-l.inFlight; got < want {
		t.Fatalf("%d cluster decisions while the load made 400 calls, want at least %d", got, want)
	}
	l.end(t)
	if n := h.fallbacks() - fb; n > 0 {
		t.Fatalf("%d calls decided by the fallback while a sub-bucket's slot moved (shards: %+v)", n, h.r.Stats().Cluster.Shards)
	}
}
