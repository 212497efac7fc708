package router

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A batch of mixed costs on one sub-bucket runs group by group, in the
// calls' order (cost 1, cost 2, cost 1 again); what this instance then
// sees of the sub-bucket is the state the last group left, not an
// earlier group's, which would count the later group's tokens as still
// there (in later replies' remaining and retry_after).
func TestSplitSeesTheLastStateOfABatch(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	const key = "batched"
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), HotKeys: []string{key}, Share: 1})
	iv, err := bucket.Limit{Capacity: 30, Refill: 1, Period: 3600_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	var hk *hotKey
	for hk == nil || hk.split.Load() == nil {
		if ctx.Err() != nil {
			t.Fatal("the key was not split")
		}
		res := make([]Result, 1)
		c.Decide(ctx, []Request{{Op: Take, Key: key, Interval: iv, Cost: 0}}, res)
		time.Sleep(10 * time.Millisecond)
		hk = (*c.hot.keys.Load())[key]
	}
	st, topo := hk.split.Load(), c.topo.Load()
	reqs := []Request{
		{Op: Take, Key: key, Interval: iv, Cost: 1},
		{Op: Take, Key: key, Interval: iv, Cost: 2},
		{Op: Take, Key: key, Interval: iv, Cost: 1},
	}
	res := make([]Result, len(reqs))
	var ws []*waiter
	for i := range reqs {
		h := &hotCall{req: i, hk: hk, sub: -1, prevSub: -1}
		h.follow(st, &reqs[i])
		h.steps = len(h.parts) // no sibling retry: the sub-bucket's own outcome
		h.then = func(h *hotCall) { c.advance(h, reqs, res, topo) }
		h.w = &waiter{st: st, parts: h.parts, cost: reqs[i].Cost, sub: 0, then: func() { h.then(h) }}
		ws = append(ws, h.w)
	}
	c.step(hk, ws)
	for i, w := range ws {
		if w.err != nil || w.res.Limited {
			t.Fatalf("call %d: %+v, %v; want allowed", i, w.res, w.err)
		}
	}
	parts := hk.partsFor(st, iv)
	seen, _ := st.seen.tokens(0, parts[0], fillTime(iv), time.Now().UnixMicro())
	if last := ws[2].res.Remaining; seen != last {
		t.Fatalf("sub-bucket 0 seen with %d tokens, want %d, as the last call's group, decided last, left it (the calls before saw %d, %d)",
			seen, last, ws[0].res.Remaining, ws[1].res.Remaining)
	}
	if a, b, c := ws[0].res.Remaining, ws[1].res.Remaining, ws[2].res.Remaining; a-b != 2 || b-c != 1 {
		t.Fatalf("the calls of costs 1, 2, 1 left %d, %d, %d tokens: not decided in their order", a, b, c)
	}
}
