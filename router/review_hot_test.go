package router

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A call costing more than the whole bucket is denied whatever the split
// (retry_after -1), so it must not shrink the splits this instance makes:
// counted as a call too big for any sub-bucket, it left no room for one
// (capacity/cost is 0) and the key, hot for good when declared, was never
// split again.
func TestCallOverTheWholeCapacityKeepsTheKeySplit(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	const key = "overcap"
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), HotKeys: []string{key}, Share: 1})
	iv, err := bucket.Limit{Capacity: 30, Refill: 1, Period: 3600_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	res := make([]Result, 1)
	c.Decide(ctx, []Request{{Op: Take, Key: key, Interval: iv, Cost: 31}}, res)
	if res[0].Err != nil || !res[0].Limited || res[0].RetryAfter != -1 {
		t.Fatalf("a call over the capacity: %+v, want denied for good", res[0])
	}
	hk := (*c.hot.keys.Load())[key]
	if hk == nil {
		t.Fatal("the declared key has no entry")
	}
	for !hk.renewing.CompareAndSwap(false, true) {
		if ctx.Err() != nil {
			t.Fatal("the background never let go of the key")
		}
		time.Sleep(time.Millisecond)
	}
	c.renew(ctx, hk)
	if st := hk.split.Load(); st == nil || len(st.tags) != 3 {
		t.Fatalf("after a renewal the key's split is %+v, want one in 3", st)
	}
}

// A renewal from an instance that still holds an older split of the key
// (G1: its calls have not met the split made since, G2) must not write
// what it read of G1's sub-buckets into G2: full or missing there, they
// made G2's base and lapse full, and a key emptied before G2 was made
// admitted its whole capacity again.
// Nor does such an instance, cooled, end the split it does not know.
func TestRenewalOfAnOlderSplitKeepsTheNewOnesState(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	const key = "replaced"
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), HotThreshold: -1, Share: 1})
	iv, err := bucket.Limit{Capacity: 30, Refill: 1, Period: 3600_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	take := func() Result {
		res := make([]Result, 1)
		c.Decide(ctx, []Request{{Op: Take, Key: key, Interval: iv, Cost: 1}}, res)
		return res[0]
	}
	res := make([]Result, 1)
	c.Decide(ctx, []Request{{Op: Take, Key: key, Interval: iv, Cost: 30}}, res)
	if res[0].Err != nil || res[0].Limited {
		t.Fatalf("emptying the bucket: %+v", res[0])
	}
	topo, cl := c.topo.Load(), *c.client.Load()
	g2, err := lua.NewSplitter().Split(ctx, cl, KeyPrefix+key, topo.tags[:topo.split], time.Minute, -1)
	if err != nil {
		t.Fatal(err)
	}
	stale := func() *hotKey {
		hk := newHotKey(key, false)
		hk.setSplit(lua.Split{Tags: g2.Tags, Gen: "1", Base: "0", TTL: time.Minute}, time.Now().UnixNano())
		hk.renewing.Store(true)
		return hk
	}
	c.endSplit(ctx, stale())
	if v, err := cl.Do(ctx, cl.B().Get().Key(KeyPrefix+key).Build()).ToString(); err != nil || strings.HasSuffix(v, "!") {
		t.Fatalf("the split after a cooled instance ended an older one: %q (%v), want it live", v, err)
	}
	hk := stale()
	hk.detected.Store(true)
	c.renew(ctx, hk)
	if st := hk.split.Load(); st == nil || st.gen != g2.Gen {
		t.Fatalf("after the renewal the instance holds %+v, want split %s", st, g2.Gen)
	}
	for i := range 3 {
		if r := take(); r.Err != nil || !r.Limited {
			t.Fatalf("call %d on the emptied key, split anew: %+v, want denied", i, r)
		}
	}
}
