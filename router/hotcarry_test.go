package router

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A step queued with an earlier reading of the split in force (a renewal
// or a reread replaced it meanwhile: same split, new reading) moves a
// sub-bucket whose shard went down to its stand-in carrying the state
// this instance saw it in, as a step with the latest reading does: a
// stand-in started at the split's base would grant again what the
// sub-bucket had spent, and mark the move done, so no later step
// carries it either.
func TestStaleReadingCarriesSubBucketState(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	const key = "carried"
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), HotKeys: []string{key}, Share: 1, Timeout: 200 * time.Millisecond})
	iv, err := bucket.Limit{Capacity: 30, Refill: 1, Period: 3600_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	take := func() Result {
		res := make([]Result, 1)
		c.Decide(ctx, []Request{{Op: Take, Key: key, Interval: iv, Cost: 1}}, res)
		return res[0]
	}
	take()
	var hk *hotKey
	for hk == nil || hk.split.Load() == nil {
		if ctx.Err() != nil {
			t.Fatal("the key was not split")
		}
		time.Sleep(10 * time.Millisecond)
		hk = (*c.hot.keys.Load())[key]
	}
	for range 60 {
		if r := take(); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	st, topo := hk.split.Load(), c.topo.Load()
	parent := topo.ownerOf(hk.parent)
	sub := -1
	for i, sl := range st.slots {
		if o := topo.owner(sl); o != parent && st.seen.placed[i].Load() == int32(i+1) {
			sub = i
			break
		}
	}
	if sub < 0 {
		t.Fatalf("no sub-bucket off the parent's shard decided here: %+v", st)
	}
	now := time.Now().UnixMicro()
	if full := st.seen.fullAt[sub].Load(); full < now+fillTime(iv)/2 {
		t.Fatalf("sub-bucket %d seen full at %d, want drained (full about %d)", sub, full, now+fillTime(iv))
	}
	down := topo.owner(st.slots[sub])
	var victim *clustertest.Node
	for _, n := range cc.Nodes {
		if n.Addr == down.addr {
			victim = n
		}
	}
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	c.fault(down, errors.New("test: paused"))

	// A newer reading of the same split, as a renewal stores.
	hk.extendSplit(st, lua.Split{Tags: st.tags, Gen: st.gen, Base: st.base, TTL: 2 * time.Second}, time.Now().UnixNano())
	if hk.split.Load() == st {
		t.Fatal("the split's reading was not replaced")
	}
	w := &waiter{st: st, parts: hk.partsFor(st, iv), cost: 1, sub: sub, then: func() {}}
	c.step(hk, []*waiter{w})
	if w.err != nil || w.at == sub {
		t.Fatalf("step of sub-bucket %d with its shard down: at %d, %v; want its stand-in", sub, w.at, w.err)
	}
	if !w.res.Limited {
		t.Fatalf("drained sub-bucket %d on its stand-in: got %+v, want denied", sub, w.res)
	}
}

// A followed split that runs out while its parent's shard is down, with
// no call on the key meanwhile, is still held when the next call comes:
// the background's sweep of lapsed splits must not forget it first, or
// the key is decided by fallback for the rest of the outage.
func TestFollowedSplitHeldWithoutCalls(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	const key = "quiet"
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), HotThreshold: -1, Share: 1})
	topo, cl := c.topo.Load(), *c.client.Load()
	// Long enough to outlast the setup below under -race on a loaded
	// machine: the split must be live when the parent's shard goes down.
	if _, err := lua.NewSplitter().Split(ctx, cl, KeyPrefix+key, topo.tags[:topo.split], 1500*time.Millisecond, -1); err != nil {
		t.Fatal(err)
	}
	iv, err := bucket.Limit{Capacity: 30, Refill: 1, Period: 3600_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	take := func() Result {
		res := make([]Result, 1)
		c.Decide(ctx, []Request{{Op: Take, Key: key, Interval: iv, Cost: 1}}, res)
		return res[0]
	}
	if r := take(); r.Err != nil || r.Source != SourceCluster {
		t.Fatalf("a call on the split key: %+v, want a cluster decision", r)
	}
	hk := (*c.hot.keys.Load())[key]
	var st *splitState
	if hk != nil {
		st = hk.live(time.Now().UnixNano())
	}
	if st == nil {
		t.Fatal("the split is not followed")
	}
	until := st.until
	parent := topo.ownerOf(hk.parent)
	for _, n := range cc.Nodes {
		if n.Addr == parent.addr {
			if err := n.Pause(); err != nil {
				t.Fatal(err)
			}
			defer n.Resume()
		}
	}
	c.fault(parent, errors.New("test: the parent's shard is down"))
	if time.Now().UnixNano() >= until {
		t.Fatal("the split ran out before its parent's shard went down: the setup took longer than its TTL")
	}
	// Past the split's end and two rounds of the background (every 50ms):
	// time must pass, a sweep that rightly keeps the split shows nothing.
	for time.Now().UnixNano() < until+int64(150*time.Millisecond) {
		time.Sleep(10 * time.Millisecond)
	}
	if r := take(); r.Err != nil || r.Source != SourceCluster {
		t.Fatalf("a call after the split ran out during the outage: %+v, want a cluster decision from the held split", r)
	}
}

// connectedCluster is a Cluster of cfg, connected, and closed when the
// test ends; ctx bounds the test.
func connectedCluster(t *testing.T, cfg ClusterConfig) (*Cluster, context.Context) {
	t.Helper()
	c := NewCluster(cfg)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if err := c.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	return c, ctx
}
