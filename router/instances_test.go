package router_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// One plain key alternated through three instances counts in one bucket:
// the remaining tokens go down by one per call whichever instance asks,
// and concurrent calls through all three admit the limit once.
func TestMultiPlainKeyOneBucket(t *testing.T) {
	c, _, _ := hotCluster(t, clustertest.Config{Replicas: -1})
	var rs []*router.Cluster
	for range 3 {
		r := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
		waitConnected(t, r)
		rs = append(rs, r)
	}
	iv := interval(t, 10, 1, 3600_000_000)
	for i := range 12 {
		res := decide(rs[i%3], "alt", iv)
		if res.Err != nil || res.Source != router.SourceCluster {
			t.Fatalf("call %d: %+v", i, res)
		}
		wantLimited := i >= 10
		wantRem := int64(max(9-i, 0))
		if res.Limited != wantLimited || res.Remaining != wantRem {
			t.Fatalf("call %d through instance %d: limited %v remaining %d, want %v %d", i, i%3, res.Limited, res.Remaining, wantLimited, wantRem)
		}
	}
	const capacity, refill = 50, 100
	civ := interval(t, capacity, refill, 1_000_000)
	stop := make(chan struct{})
	var s tally
	wg := hammer(rs, "concurrent", civ, 9, 0, stop, &s)
	s.runFor(t, 1500*time.Millisecond)
	close(stop)
	wg.Wait()
	if n := s.errors.Load(); n > 0 {
		t.Fatalf("%d errors, first %v", n, s.firstErr.Load())
	}
	ideal := capacity + refill*s.span()
	got := float64(s.allowed.Load())
	t.Logf("admitted %.0f of %d, ideal %.1f over %.2fs", got, s.calls.Load(), ideal, s.span())
	if got > ideal+2 || got < 0.97*ideal {
		t.Fatalf("admitted %.0f, want within [%.1f, %.1f]", got, 0.97*ideal, ideal+2)
	}
}

// A hot key split by one instance, and decided in turn through it and two
// instances that never found it hot (detection off), counts in one set of
// sub-buckets: with no refill to speak of, the three together admit the
// capacity, give or take one token per sub-bucket, across the split, its
// cooling and its lapse into one bucket.
func TestMultiSplitByOneFollowedByTwo(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	a := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"followed"}, HotCooldown: 500 * time.Millisecond})
	b := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
	d := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
	for _, r := range []*router.Cluster{a, b, d} {
		waitConnected(t, r)
	}
	iv := interval(t, 60, 1, 3600_000_000)
	// b takes 20 tokens before any split: the split keeps that state.
	admitted := 0
	for range 20 {
		if res := decide(b, "followed", iv); res.Err != nil {
			t.Fatal(res.Err)
		} else if !res.Limited {
			admitted++
		}
	}
	if res := decide(a, "followed", iv); !res.Limited {
		admitted++
	}
	waitFor(t, 2*time.Second, "split marker", func() bool { _, ok := marker(ctx, cl, "followed"); return ok })
	rs := []*router.Cluster{a, b, d}
	deadline := time.Now().Add(15 * time.Second)
	lapsed := false
	for i := 0; !lapsed; i++ {
		if time.Now().After(deadline) {
			t.Fatal("the split did not lapse within 15s")
		}
		// Not through a: a declared key is hot only while asked, so a cools
		// it and the split lapses.
		r := rs[1+i%2]
		if res := decide(r, "followed", iv); res.Err != nil {
			t.Fatal(res.Err)
		} else if !res.Limited {
			admitted++
		}
		// Lapsed: closed, and neither follower holds the split any more.
		// (An empty bucket it lapsed into stays a closing marker until a
		// call takes from it.)
		v, err := cl.Do(ctx, cl.B().Get().Key(router.KeyPrefix+"followed").Build()).ToString()
		lapsed = err == nil && (len(v) == 19 || strings.HasSuffix(v, "!")) && len(stats(b).Hot) == 0 && len(stats(d).Hot) == 0
		time.Sleep(2 * time.Millisecond)
	}
	if st := stats(b); st.Split == 0 && st.DeniedHere == 0 {
		t.Fatalf("b never followed the split: %+v", st)
	}
	for i := range 100 {
		if res := decide(rs[i%3], "followed", iv); !res.Limited {
			admitted++
		}
	}
	t.Logf("admitted %d of a 60-token bucket", admitted)
	if admitted > 60+3 || admitted < 60 {
		t.Fatalf("admitted %d of a 60-token bucket across three instances, want 60 to 63", admitted)
	}
}
