package router

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A split's time until full is read on the shards' clocks: a sub-bucket
// full by the time its shard reads it counts as full. The shards are
// paused as the sub-buckets are read, which puts sluice's clock behind
// theirs by the pause (a shard's clock cannot be set in a test); a time
// taken from sluice's clock would count as still filling sub-buckets
// that are full, and one ahead of the shards' as full ones still filling.
func TestSplitTTFOnTheShardsClocks(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	const key = "skewed"
	const pause = time.Second
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs(), HotThreshold: -1, Share: 1, Timeout: 5 * pause})
	topo, cl := c.topo.Load(), *c.client.Load()
	sent := time.Now().UnixNano()
	sp, err := lua.NewSplitter().Split(ctx, cl, KeyPrefix+key, topo.tags[:topo.split], time.Minute, -1)
	if err != nil {
		t.Fatal(err)
	}
	hk := c.hot.follow(key, sp, sent)
	st := hk.split.Load()
	fullAt := func(at time.Time) {
		tat := strconv.FormatInt(at.UnixNano(), 10)
		for _, k := range st.keys {
			if err := cl.Do(ctx, cl.B().Set().Key(k).Value(tat).Px(time.Minute).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	fullAt(time.Now().Add(10 * time.Second))
	if ttf, _ := c.readTTF(ctx, cl, topo, hk, st); ttf > 10*time.Second || ttf < 9*time.Second {
		t.Fatalf("time until full of sub-buckets full in 10s: %v", ttf)
	}

	fullAt(time.Now().Add(pause / 2))
	// On sluice's own connections, which it keeps open: a client closed
	// while its server is paused waits for the pause to end.
	paused := map[*shard]bool{}
	for _, s := range topo.shards {
		if s == nil || paused[s] {
			continue
		}
		paused[s] = true
		node := *s.node.Load()
		if err := node.Do(ctx, node.B().Arbitrary("CLIENT", "PAUSE", strconv.FormatInt(pause.Milliseconds(), 10), "ALL").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if ttf, _ := c.readTTF(ctx, cl, topo, hk, st); ttf != 0 {
		t.Fatalf("time until full of sub-buckets full when read: %v, want 0", ttf)
	}
}
