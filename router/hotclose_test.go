package router_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// closingSplit splits key through a (which declares it hot) with 3
// sub-buckets, has b follow the split, and then has a see a call too big
// for them, so that a's next renewal closes the split. It returns the raw
// closing marker as soon as it is seen, and the tokens its calls took.
func closingSplit(t *testing.T, ctx context.Context, cl rueidis.Client, a, b *router.Cluster, key string) (string, lua.Split, int64) {
	t.Helper()
	iv := interval(t, 60, 1, 3600_000_000)
	var admitted int64
	if res := decide(a, key, iv); res.Err != nil || res.Limited {
		t.Fatalf("first call: %+v", res)
	}
	admitted++
	var sp lua.Split
	waitFor(t, 2*time.Second, "split marker", func() bool {
		var ok bool
		sp, ok = marker(ctx, cl, key)
		return ok && len(sp.Tags) == 3
	})
	if res := decide(b, key, iv); res.Err != nil {
		t.Fatal(res.Err)
	} else if !res.Limited {
		admitted++
	}
	if st := stats(b); len(st.Hot) != 1 || st.Hot[0].SubBuckets != 3 {
		t.Fatalf("the follower uses %+v, want the split in 3", st.Hot)
	}
	// A call of 30 does not fit a sub-bucket of 20: a wants 2 from now on.
	big := make([]router.Result, 1)
	router.SubmitAndWait(a, ctx, []router.Request{{Key: key, Interval: iv, Cost: 30}}, big)
	if !big[0].Limited {
		admitted += 30
	}
	var raw string
	waitFor(t, 3*time.Second, "the split closing", func() bool {
		v, err := cl.Do(ctx, cl.B().Get().Key(router.KeyPrefix+key).Build()).ToString()
		raw = v
		return err == nil && strings.HasSuffix(v, "!")
	})
	if got, _ := lua.Marker(raw); got.Gen != sp.Gen {
		t.Fatalf("closing marker %q, want split %s", raw, sp.Gen)
	}
	return raw, sp, admitted
}

// The bucket a closing split lapses into counts the tokens taken from its
// sub-buckets after it was closed: the last re-close before the lapse
// reads them. Drained right after the close, the key admits nothing more
// once it lapses (and is split anew), but for its refill.
func TestHotKeyClosingSplitLapsesIntoWhatWasTakenAfterTheClose(t *testing.T) {
	c, ctx, cl := hotCluster(t, clustertest.Config{Replicas: -1})
	a := newRouter(t, c.Addrs(), router.ClusterConfig{HotKeys: []string{"drained"}})
	b := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1})
	waitConnected(t, a)
	waitConnected(t, b)
	iv := interval(t, 60, 1, 3600_000_000)
	raw, sp, admitted := closingSplit(t, ctx, cl, a, b, "drained")
	// Take every token left, through both instances, while the split is
	// live and closing.
	for range 100 {
		for _, r := range []*router.Cluster{a, b} {
			if res := decide(r, "drained", iv); res.Err != nil {
				t.Fatal(res.Err)
			} else if !res.Limited {
				admitted++
			}
		}
	}
	// The drain must end before the last re-closes, which read it.
	until, _ := strconv.ParseInt(strings.Split(raw, ":")[1], 10, 64)
	if left := time.Until(time.UnixMilli(until)); left < 300*time.Millisecond {
		t.Fatalf("the drain ended %v before the split lapses (%q): too slow a machine for this test", left, raw)
	}
	waitFor(t, 4*time.Second, "the next split", func() bool {
		next, ok := marker(ctx, cl, "drained")
		return ok && next.Gen != sp.Gen
	})
	for range 100 {
		for _, r := range []*router.Cluster{a, b} {
			if res := decide(r, "drained", iv); res.Err != nil {
				t.Fatal(res.Err)
			} else if !res.Limited {
				admitted++
			}
		}
	}
	// 60 tokens, within one token per sub-bucket, and 1 a minute of refill.
	if admitted > 60+5 {
		t.Fatalf("admitted %d of a 60-token bucket across a closing split and its lapse, want at most 65", admitted)
	}
}
