package router

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A cluster user not allowed COMMAND leaves every ordinary command
// answered TRYAGAIN for as long as it lasts: an operator at the default
// level must be told, once, and not at every tick of the loop (20 a
// second) at debug.
func TestCommandTableRefusedIsOneWarning(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1, Password: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if err := n.Do(ctx, "ACL", "SETUSER", "nocommand", "on", ">pw", "~*", "&*", "+@all", "-command").Error(); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zap.DebugLevel)
	r := NewCluster(ClusterConfig{Seeds: c.Addrs(), Username: "nocommand", Password: "pw",
		ProbeInterval: 20 * time.Millisecond, HotThreshold: -1, Logger: zap.New(core)})
	t.Cleanup(r.Close)
	if err := r.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	about := func() []observer.LoggedEntry { return logs.FilterMessageSnippet("COMMAND").All() }
	for deadline := time.Now().Add(2 * time.Second); len(about()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning of the refused COMMAND; %d debug lines of it", logs.FilterMessageSnippet("reading the cluster's commands").Len())
		}
	}
	r.readCommands(ctx)
	r.readCommands(ctx)
	if got := about(); len(got) != 1 || got[0].Level != zap.WarnLevel {
		t.Errorf("the refused COMMAND logged %d times (%v), want one warning", len(got), got)
	}
	if n := logs.FilterMessageSnippet("reading the cluster's commands").Len(); n != 0 {
		t.Errorf("the refusal also logged %d times at debug", n)
	}
}

// An unhealthy primary whose slots went to another (its replica promoted)
// is forgotten: without a line saying so, the log leaves its keys decided
// by the fallback for good, where the new primary decides them.
func TestUnhealthyPrimaryForgottenIsLogged(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	c := &Cluster{forgotten: map[string]faults{}, log: zap.New(core)}
	down, up := &shard{addr: "10.0.0.1:6379"}, &shard{addr: "10.0.0.2:6379"}
	up.healthy.Store(true)
	c.mu.Lock()
	c.forget(down)
	c.forget(up)
	c.mu.Unlock()
	got := logs.All()
	if len(got) != 1 || got[0].ContextMap()["shard"] != down.addr {
		t.Fatalf("logged %v, want one line naming the unhealthy primary %s", got, down.addr)
	}
}
