package router_test

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A split replaced by a new one (here: a call too big for its 3
// sub-buckets closes it, and the next renewal after it lapses splits the
// key in 2) is a new split of the key, with other sub-buckets: it is
// logged as the first one was, with its tags, at the same level. Before,
// only the first split of a key was logged, and an operator reading the
// log still saw the key in 3 sub-buckets.
func TestReviewResplitLogsTheNewSplit(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	core, logs := observer.New(zap.DebugLevel)
	r := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"resplit"}, HotThreshold: -1, Logger: zap.New(core)})
	waitConnected(t, r)
	const key = "resplit"
	iv := interval(t, 60, 1, 3600_000_000)
	if res := decide(r, key, iv); res.Err != nil || res.Limited {
		t.Fatalf("first call: %+v", res)
	}
	waitFor(t, 2*time.Second, "the first split's log line", func() bool { return logs.FilterMessage("hot key split").Len() == 1 })
	first := logs.FilterMessage("hot key split").All()[0]
	sp, ok := marker(ctx, cl, key)
	if !ok || len(sp.Tags) != 3 {
		t.Fatalf("first split %+v (%v), want one in 3", sp, ok)
	}
	// A call of 30 does not fit a sub-bucket of 20: the split closes and
	// the next one has 2.
	big := make([]router.Result, 1)
	router.SubmitAndWait(r, ctx, []router.Request{{Key: key, Interval: iv, Cost: 30}}, big)
	waitFor(t, 6*time.Second, "the next split", func() bool {
		next, ok := marker(ctx, cl, key)
		if ok && next.Gen != sp.Gen {
			sp = next
			return true
		}
		return false
	})
	if len(sp.Tags) != 2 {
		t.Fatalf("the next split has tags %v, want 2", sp.Tags)
	}
	const msg = "hot key split anew"
	waitFor(t, 2*time.Second, "the next split's log line", func() bool { return logs.FilterMessage(msg).Len() == 1 })
	e := logs.FilterMessage(msg).All()[0]
	if e.Level != first.Level {
		t.Fatalf("the new split logged at %v, the first at %v", e.Level, first.Level)
	}
	f := e.ContextMap()
	tags, _ := f["tags"].([]any)
	var got []string
	for _, tag := range tags {
		s, _ := tag.(string)
		got = append(got, s)
	}
	if f["key"] != key || f["sub_buckets"] != int64(2) || !slices.Equal(got, sp.Tags) {
		t.Fatalf("the new split's line has %v, want key %s in 2 sub-buckets with tags %v", f, key, sp.Tags)
	}
	if n := logs.FilterMessage("hot key split").Len(); n != 1 {
		t.Fatalf("%d lines say the key was split first, want 1", n)
	}
}
