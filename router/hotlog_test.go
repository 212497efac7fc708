package router_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

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
