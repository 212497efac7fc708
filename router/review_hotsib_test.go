package router

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A call denied by its sub-bucket and sent on to a sibling whose shard
// hangs is decided by that sibling's stand-in, as a first step on a hung
// shard is (README: "decided by a sibling on a healthy shard before any
// fallback"): the fault on a later step sent it to the fallback, whose
// local bucket, with a sub-bucket never seen here, started full and
// admitted the key's whole capacity again on top of what the split had.
func TestHotSiblingStepOnAHungShardUsesItsStandIn(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	const key = "hophung"
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), HotKeys: []string{key}, Share: 1, Timeout: 200 * time.Millisecond})
	const capacity = 30
	iv, err := bucket.Limit{Capacity: capacity, Refill: 1, Period: 3600_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	first := make([]Result, 1)
	c.Decide(ctx, []Request{{Op: Take, Key: key, Interval: iv, Cost: 1}}, first)
	if first[0].Err != nil || first[0].Limited {
		t.Fatalf("the first call: %+v", first[0])
	}
	var hk *hotKey
	for hk == nil || hk.split.Load() == nil {
		if ctx.Err() != nil {
			t.Fatal("the key was not split")
		}
		time.Sleep(10 * time.Millisecond)
		hk = (*c.hot.keys.Load())[key]
	}
	st, topo := hk.split.Load(), c.topo.Load()
	n := len(st.keys)
	if n != 3 {
		t.Fatalf("split in %d, want one sub-bucket per primary", n)
	}
	parent := topo.ownerOf(hk.parent)
	v := -1
	for i, sl := range st.slots {
		if topo.owner(sl) != parent {
			v = i
			break
		}
	}
	if v < 0 {
		t.Fatalf("no sub-bucket off the parent's shard: %+v", st)
	}
	var victim *clustertest.Node
	for _, node := range cc.Nodes {
		if node.Addr == topo.owner(st.slots[v]).addr {
			victim = node
		}
	}
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	// The burst goes to a sibling of the hung sub-bucket, which it then
	// reaches by the denials' hops (none seen yet: each looks full).
	a := (v + 1) % n
	hk.next.Store(uint32(a + n - 1))
	reqs := make([]Request, 60)
	for i := range reqs {
		reqs[i] = Request{Op: Take, Key: key, Interval: iv, Cost: 1}
	}
	res := make([]Result, len(reqs))
	c.Decide(ctx, reqs, res)
	allowed, fallback := 1, 0
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if r.Source != SourceCluster {
			fallback++
		}
		if !r.Limited {
			allowed++
		}
	}
	if allowed > capacity || fallback > 0 {
		t.Fatalf("%d of %d calls allowed on a bucket of %d, %d by fallback; want at most %d, none by fallback",
			allowed, 1+len(reqs), capacity, fallback, capacity)
	}
}
