package router

import (
	"testing"
	"time"

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
