package router_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A hung shard's error, in its log line and INFO, says what happened in
// an operator's words, whichever path met it: not Go's "context deadline
// exceeded".
func TestHungShardErrorSaysNoReply(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	victim := c.Nodes[0]
	var key string
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if n, err := c.Primary(ctx, slot.Of(router.KeyPrefix+k)); err != nil {
			t.Fatal(err)
		} else if n == victim {
			key = k
		}
	}
	r := newRouter(t, c.Addrs(), router.ClusterConfig{Timeout: 100 * time.Millisecond, HotThreshold: -1})
	waitConnected(t, r)
	iv := interval(t, 10, 1, 1_000_000)
	decide(r, key, iv)
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	decide(r, key, iv)
	st := shardStats(t, r, victim.Addr)
	if st.Healthy || !strings.Contains(st.LastError, "no reply within") {
		t.Fatalf("paused shard: %+v, want unhealthy, its last error naming no reply within the timeout", st)
	}
}

// A key of a --hot-keys pattern (one per user, say) is split when first
// asked: its split is logged at debug, where a detected key's is news at
// info (TestHotKeyCoolsWithoutBurst).
func TestDeclaredHotKeySplitLogsAtDebug(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	core, logs := observer.New(zap.DebugLevel)
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"login:*"}, HotThreshold: -1, Logger: zap.New(core)})
	waitConnected(t, r)
	decide(r, "login:ann", interval(t, 10, 1, 1_000_000))
	waitFor(t, 2*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, "login:ann"); return ok })
	waitFor(t, 2*time.Second, "the split's log line", func() bool { return logs.FilterMessage("hot key split").Len() == 1 })
	if e := logs.FilterMessage("hot key split").All()[0]; e.Level != zap.DebugLevel {
		t.Fatalf("a declared key's split logged at %v, want debug", e.Level)
	}
}
