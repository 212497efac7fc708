package lua_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/bucket/buckettest"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// One cluster serves the subtests; each uses keys of its own.
func TestThrottleOnCluster(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	th := lua.NewThrottle()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	do := func(t *testing.T, calls ...lua.Call) ([]lua.Result, []error) {
		t.Helper()
		res, errs := make([]lua.Result, len(calls)), make([]error, len(calls))
		th.Do(ctx, cl, calls, res, errs)
		return res, errs
	}
	one := func(t *testing.T, call lua.Call) lua.Result {
		t.Helper()
		res, errs := do(t, call)
		if errs[0] != nil {
			t.Fatalf("%+v: %v", call, errs[0])
		}
		return res[0]
	}

	t.Run("vectors", func(t *testing.T) {
		// Virtual time starts 10 minutes ahead of the shard's clock: keys
		// expire (PXAT) at their virtual full instant, which real time
		// cannot reach while the steps run, so no key vanishes under a step.
		// The arithmetic only sees differences, so the answers are those of
		// buckettest.Start.
		tm, err := cl.Do(ctx, cl.B().Time().Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		sec, _ := strconv.ParseInt(tm[0], 10, 64)
		us, _ := strconv.ParseInt(tm[1], 10, 64)
		start := sec*1_000_000 + us + 600_000_000
		for ci, vc := range buckettest.Cases() {
			key := "vec:" + strconv.Itoa(ci)
			for i, s := range vc.Steps {
				iv, err := vc.LimitAt(s).Interval()
				if err != nil {
					t.Fatal(err)
				}
				r := one(t, lua.Call{Key: key, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: s.Cost, Now: start + s.T})
				if got := buckettest.Got(bucket.Result(r)); got != s.Want {
					t.Fatalf("%s, step %d (t=%d cost=%d): got %v, want %v", vc.Name, i, s.T, s.Cost, got, s.Want)
				}
			}
		}
	})

	t.Run("a batch of n calls decides as n calls in a row", func(t *testing.T) {
		tm, err := cl.Do(ctx, cl.B().Time().Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		sec, _ := strconv.ParseInt(tm[0], 10, 64)
		start := sec*1_000_000 + 600_000_000 // virtual time ahead, as for the vectors
		for ci, tc := range []struct {
			lim        bucket.Limit
			pre        int64 // tokens taken before, at start
			cost, n, t int64 // the batch: n calls of cost, t µs after start
		}{
			{bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}, 0, 1, 4, 0},
			{bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}, 7, 1, 6, 500_000},
			{bucket.Limit{Capacity: 10, Refill: 3, Period: 1_000_000}, 10, 2, 5, 1_000_000},
			{bucket.Limit{Capacity: 7, Refill: 10, Period: 1_000_000}, 0, 3, 4, 0},
			{bucket.Limit{Capacity: 5, Refill: 1, Period: 60_000_000}, 5, 1, 3, 1},
			{bucket.Limit{Capacity: 5, Refill: 1, Period: 1_000_000}, 1, 0, 3, 0},
			{bucket.Limit{Capacity: 5, Refill: 1, Period: 1_000_000}, 0, 6, 2, 0},
		} {
			iv, err := tc.lim.Interval()
			if err != nil {
				t.Fatal(err)
			}
			key := "batch:" + strconv.Itoa(ci)
			var tat int64
			if tc.pre > 0 {
				one(t, lua.Call{Key: key, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: tc.pre, Now: start})
				_, tat = bucket.Take(0, start, iv, tc.pre)
			}
			var want lua.Result
			var wantTaken int64
			for range tc.n {
				r, store := bucket.Take(tat, start+tc.t, iv, tc.cost)
				if store != 0 {
					tat = store
				}
				if !r.Limited {
					wantTaken++
				}
				want = lua.Result(r)
			}
			res, taken, errs := make([]lua.Result, 1), make([]int64, 1), make([]error, 1)
			th.DoBatch(ctx, cl, []lua.Call{{Key: key, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: tc.cost, N: tc.n, Now: start + tc.t}}, res, taken, errs)
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			if res[0] != want || taken[0] != wantTaken {
				t.Fatalf("case %d: batch got %+v taking %d, want %+v taking %d", ci, res[0], taken[0], want, wantTaken)
			}
			if stored, _ := cl.Do(ctx, cl.B().Get().Key(key).Build()).ToString(); tat != 0 && stored != strconv.FormatInt(tat, 10) {
				t.Fatalf("case %d: stored %s, want %d", ci, stored, tat)
			}
		}
	})

	t.Run("pipelined calls on one key run in order", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 3, Refill: 1, Period: 3600_000_000}.Interval()
		calls := make([]lua.Call, 5)
		for i := range calls {
			calls[i] = lua.Call{Key: "{p}ordered", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}
		}
		res, errs := do(t, calls...)
		for i, r := range res {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			wantLimited := i >= 3
			wantRemaining := max(int64(2-i), 0)
			if r.Limited != wantLimited || r.Remaining != wantRemaining {
				t.Fatalf("call %d: got %+v, want limited=%v remaining=%d", i, r, wantLimited, wantRemaining)
			}
		}
	})

	t.Run("the shard's clock and a TTL until full", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}.Interval()
		r := one(t, lua.Call{Key: "clock", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 4})
		if r.Limited || r.Remaining != 6 || r.ResetAfter != 4_000_000 {
			t.Fatalf("got %+v, want 6 left and full again in 4s", r)
		}
		val, _ := cl.Do(ctx, cl.B().Get().Key("clock").Build()).ToString()
		tat, _ := strconv.ParseInt(val, 10, 64)
		// The key expires at the full instant, rounded up to the ms: never
		// before the bucket is full, and no later than that.
		at, err := cl.Do(ctx, cl.B().Pexpiretime().Key("clock").Build()).AsInt64()
		if err != nil || at != buckettest.ExpireAt(tat) {
			t.Fatalf("PEXPIRETIME %d (%v), want %d for a TAT of %d ns", at, err, buckettest.ExpireAt(tat), tat)
		}
		// The stored instant is the shard's time plus 4s; the shard runs on
		// this machine, so its clock is ours within a second.
		if d := time.Until(time.Unix(0, tat)); d < 3*time.Second || d > 5*time.Second {
			t.Fatalf("stored TAT %s is %v from now, want about 4s", val, d)
		}
	})

	t.Run("denials and peeks write nothing", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 2, Refill: 1, Period: 1_000_000}.Interval()
		one(t, lua.Call{Key: "peek", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0})
		one(t, lua.Call{Key: "peek", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 3})
		if n, _ := cl.Do(ctx, cl.B().Exists().Key("peek").Build()).AsInt64(); n != 0 {
			t.Fatal("a peek or an impossible cost created the bucket")
		}
		one(t, lua.Call{Key: "peek", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 2})
		before, _ := cl.Do(ctx, cl.B().Get().Key("peek").Build()).ToString()
		if r := one(t, lua.Call{Key: "peek", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}); !r.Limited {
			t.Fatalf("got %+v, want a denial", r)
		}
		one(t, lua.Call{Key: "peek", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0})
		after, _ := cl.Do(ctx, cl.B().Get().Key("peek").Build()).ToString()
		if before != after {
			t.Fatalf("bucket changed from %s to %s on a denial or peek", before, after)
		}
	})

	t.Run("a key that is not a bucket is an error, never overwritten", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 2, Refill: 1, Period: 1_000_000}.Interval()
		cl.Do(ctx, cl.B().Hset().Key("hash").FieldValue().FieldValue("f", "v").Build())
		cl.Do(ctx, cl.B().Set().Key("text").Value("hello").Build())
		cl.Do(ctx, cl.B().Set().Key("digits").Value("12345").Build())
		for _, k := range []string{"hash", "text", "digits"} {
			_, errs := do(t, lua.Call{Key: k, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1})
			if errs[0] == nil || !strings.HasPrefix(errs[0].Error(), "WRONGTYPE") {
				t.Fatalf("%s: got error %v, want WRONGTYPE", k, errs[0])
			}
		}
		if v, _ := cl.Do(ctx, cl.B().Get().Key("text").Build()).ToString(); v != "hello" {
			t.Fatalf("text is now %q", v)
		}
	})

	t.Run("EVAL after a shard forgot the script", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 2, Refill: 1, Period: 1_000_000}.Interval()
		one(t, lua.Call{Key: "flush", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1})
		for _, n := range c.Nodes {
			if err := n.Do(ctx, "SCRIPT", "FLUSH").Error(); err != nil {
				t.Fatal(err)
			}
		}
		if r := one(t, lua.Call{Key: "flush", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}); r.Limited || r.Remaining != 0 {
			t.Fatalf("got %+v, want the second token", r)
		}
	})

	t.Run("a split keeps the bucket's state for its sub-buckets", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 5, Refill: 1, Period: 3600_000_000}.Interval()
		one(t, lua.Call{Key: "parent", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 3})
		tat, _ := cl.Do(ctx, cl.B().Get().Key("parent").Build()).ToString()
		sp := lua.NewSplitter()
		got, err := sp.Split(ctx, cl, "parent", []string{"a", "b"}, time.Minute, -1)
		if err != nil {
			t.Fatal(err)
		}
		if got.Base != tat || !slices.Equal(got.Tags, []string{"a", "b"}) || got.TTL != time.Minute {
			t.Fatalf("split %+v, want base %s, tags a,b for 1m", got, tat)
		}
		// The parent now answers with the marker, for any call, and takes nothing.
		for _, cost := range []int64{1, 0} {
			_, errs := do(t, lua.Call{Key: "parent", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: cost})
			var se *lua.SplitError
			if !errors.As(errs[0], &se) || se.Split.Base != tat || len(se.Split.Tags) != 2 || se.Split.TTL <= 59*time.Second {
				t.Fatalf("cost %d on the parent: got %v, want the split", cost, errs[0])
			}
		}
		// A missing sub-bucket starts from the base: 2 of 5 left, as the parent had.
		if r := one(t, lua.Call{Key: "{a}sub", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0, Base: got.Base}); r.Remaining != 2 {
			t.Fatalf("sub-bucket from the base: got %+v, want 2 left", r)
		}
		// An existing sub-bucket emptier than the base keeps its state; one
		// fuller (left from an earlier split) is brought down to the base.
		one(t, lua.Call{Key: "{b}empty", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 4})
		if r := one(t, lua.Call{Key: "{b}empty", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0, Base: got.Base}); r.Remaining != 1 {
			t.Fatalf("sub-bucket emptier than the base: got %+v, want its own 1 left", r)
		}
		one(t, lua.Call{Key: "{b}full", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1})
		if r := one(t, lua.Call{Key: "{b}full", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0, Base: got.Base}); r.Remaining != 2 {
			t.Fatalf("sub-bucket fuller than the base: got %+v, want the base's 2 left", r)
		}
		// Renewing with an estimate re-bases the marker.
		got, err = sp.Split(ctx, cl, "parent", []string{"a", "b"}, time.Minute, 2*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if r := one(t, lua.Call{Key: "{a}other", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0, Base: got.Base}); r.Remaining != 3 || r.ResetAfter < 7199_000_000 {
			t.Fatalf("sub-bucket from a base 2h from full: got %+v, want 3 left", r)
		}
	})

	t.Run("a lapsed split is a bucket with the split's last state", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}.Interval()
		sp := lua.NewSplitter()
		// A new split of a missing bucket is full: the state read from
		// sub-buckets counts from the first renewal on.
		first, err := sp.Split(ctx, cl, "lapse", []string{"a"}, time.Minute, 4*time.Second)
		if err != nil || first.Base != "0" {
			t.Fatalf("new split: %+v, %v; want base 0", first, err)
		}
		renewed, err := sp.Split(ctx, cl, "lapse", []string{"a"}, 30*time.Millisecond, 4*time.Second)
		if err != nil || renewed.Gen != first.Gen || renewed.TTL != 30*time.Millisecond {
			t.Fatalf("renewal: %+v, %v; want split %s for 30ms", renewed, err, first.Gen)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			res, errs := do(t, lua.Call{Key: "lapse", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1})
			if errs[0] == nil {
				// 4 of 10 tokens were missing; one more is taken now.
				if res[0].Limited || res[0].Remaining < 5 || res[0].Remaining > 6 {
					t.Fatalf("after the split lapsed: got %+v, want about 5 left", res[0])
				}
				break
			}
			var se *lua.SplitError
			if !errors.As(errs[0], &se) || time.Now().After(deadline) {
				t.Fatalf("got %v, want the split to lapse in 30ms", errs[0])
			}
			time.Sleep(5 * time.Millisecond)
		}
		if v, _ := cl.Do(ctx, cl.B().Get().Key("lapse").Build()).ToString(); len(v) != 19 {
			t.Fatalf("after a take the parent holds %q, want a bucket again", v)
		}
	})

	t.Run("an ended split lapses on time into the sub-buckets' state", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}.Interval()
		sp := lua.NewSplitter()
		if ended, err := sp.End(ctx, cl, "ending", "", time.Second, time.Second); err != nil || ended {
			t.Fatalf("ending a missing split: %v, %v; want nothing done", ended, err)
		}
		if _, err := sp.Split(ctx, cl, "ending", []string{"a"}, 40*time.Millisecond, -1); err != nil {
			t.Fatal(err)
		}
		endedAt := time.Now()
		ended, err := sp.End(ctx, cl, "ending", "", 5*time.Second, 5*time.Second)
		if err != nil || !ended {
			t.Fatalf("ending a live split: %v, %v", ended, err)
		}
		_, errs := do(t, lua.Call{Key: "ending", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0})
		var se *lua.SplitError
		if !errors.As(errs[0], &se) || se.Split.TTL > 40*time.Millisecond {
			t.Fatalf("got %v, want the split to hold no longer than before", errs[0])
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			res, errs := do(t, lua.Call{Key: "ending", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0})
			if errs[0] == nil {
				// 5 of 10 tokens missing at the end, refilling since: full
				// again 5s after it, less the time this call came later,
				// as the client saw it (more than the 40ms lapse when
				// the machine is slow); 5 left until a second has passed.
				since := time.Since(endedAt)
				least := (5*time.Second - since).Microseconds()
				if (since < time.Second && res[0].Remaining != 5) || res[0].ResetAfter < least || res[0].ResetAfter > 5_000_000 {
					t.Fatalf("after the lapse, %v after the end: got %+v, want 5 left, full again in %dus to 5s", since, res[0], least)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still %v 5s later", errs[0])
			}
			time.Sleep(2 * time.Millisecond)
		}
	})

	t.Run("a split's sub-buckets never change while it holds", func(t *testing.T) {
		sp := lua.NewSplitter()
		first, err := sp.Split(ctx, cl, "stable", []string{"a", "b", "c"}, time.Minute, -1)
		if err != nil {
			t.Fatal(err)
		}
		// Asking for more tags renews it with its own.
		more, err := sp.Split(ctx, cl, "stable", []string{"a", "b", "c", "d"}, time.Minute, -1)
		if err != nil || more.Gen != first.Gen || !slices.Equal(more.Tags, first.Tags) {
			t.Fatalf("renewal wanting more tags: %+v, %v; want %+v kept", more, err, first)
		}
		// Asking for fewer, or others, closes it: it holds no longer than
		// it did, and no renewal extends it.
		for _, tags := range [][]string{{"a", "b"}, {"a", "b", "c"}, {"x", "y", "z"}} {
			got, err := sp.Split(ctx, cl, "stable", tags, time.Hour, -1)
			if err != nil || got.Gen != first.Gen || !slices.Equal(got.Tags, first.Tags) || got.TTL > time.Minute {
				t.Fatalf("renewal wanting %v: %+v, %v; want %+v, closing", tags, got, err, first)
			}
		}
		v, _ := cl.Do(ctx, cl.B().Get().Key("stable").Build()).ToString()
		if !strings.HasSuffix(v, "!") {
			t.Fatalf("marker %q is not closing", v)
		}
	})

	t.Run("the maker of a split decides its number of sub-buckets", func(t *testing.T) {
		sp := lua.NewSplitter()
		tags := []string{"a", "b", "c", "d"}
		first, err := sp.Renew(ctx, cl, "decided", lua.Renewal{Tags: tags, N: 3, TTL: time.Minute, TTF: -1})
		if err != nil || !slices.Equal(first.Tags, tags[:3]) {
			t.Fatalf("new split of 3: %+v, %v", first, err)
		}
		// Renewers that would make 2 or 4 keep it as it is, open.
		for _, n := range []int{2, 4} {
			got, err := sp.Renew(ctx, cl, "decided", lua.Renewal{Tags: tags, N: n, TTL: time.Minute, TTF: -1})
			if err != nil || got.Gen != first.Gen || !slices.Equal(got.Tags, first.Tags) {
				t.Fatalf("renewal by an instance splitting in %d: %+v, %v; want %+v", n, got, err, first)
			}
		}
		if v, _ := cl.Do(ctx, cl.B().Get().Key("decided").Build()).ToString(); strings.HasSuffix(v, "!") {
			t.Fatalf("marker %q is closing", v)
		}
	})

	t.Run("a split that lapsed unrenewed is taken up by those who used it", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}.Interval()
		sp := lua.NewSplitter()
		lapse := func(key string) lua.Split {
			t.Helper()
			first, err := sp.Split(ctx, cl, key, []string{"a", "b"}, 20*time.Millisecond, -1)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				if _, errs := do(t, lua.Call{Key: key, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0}); errs[0] == nil {
					return first
				}
				if time.Now().After(deadline) {
					t.Fatal("the split did not lapse in 5s")
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		first := lapse("outage")
		if _, err := sp.Renew(ctx, cl, "outage", lua.Renewal{Tags: first.Tags, N: -1, Gen: "other", TTL: time.Minute, TTF: -1}); !errors.Is(err, lua.ErrNotSplit) {
			t.Fatalf("taking up a split that is not there: %v, want ErrNotSplit", err)
		}
		got, err := sp.Renew(ctx, cl, "outage", lua.Renewal{Tags: first.Tags, N: -1, Gen: first.Gen, TTL: time.Minute, TTF: 3 * time.Second})
		if err != nil || got.Gen != first.Gen || !slices.Equal(got.Tags, first.Tags) || got.TTL != time.Minute {
			t.Fatalf("taken up: %+v, %v; want %+v again for 1m", got, err, first)
		}
		if r := one(t, lua.Call{Key: "{a}outage", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0, Base: got.Base}); r.Remaining != 7 {
			t.Fatalf("sub-bucket from the state read at the take-up: got %+v, want 7 left", r)
		}
		// Once a call has taken from the bucket it lapsed into, the
		// split is over for good.
		taken := lapse("taken")
		one(t, lua.Call{Key: "taken", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1})
		if _, err := sp.Renew(ctx, cl, "taken", lua.Renewal{Tags: taken.Tags, N: -1, Gen: taken.Gen, TTL: time.Minute, TTF: -1}); !errors.Is(err, lua.ErrNotSplit) {
			t.Fatalf("taking up a split whose bucket was taken from: %v, want ErrNotSplit", err)
		}
	})

	t.Run("a base from now carries a sub-bucket's state to another place", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 10, Refill: 1, Period: 1_000_000}.Interval()
		if r := one(t, lua.Call{Key: "{a}carried", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1, Base: "+4000000"}); r.Remaining != 5 {
			t.Fatalf("a missing bucket 4s from full: got %+v, want 5 left after one", r)
		}
		// Carried by a denial, it stays: the next step carries nothing.
		one(t, lua.Call{Key: "{a}refilled", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1})
		if r := one(t, lua.Call{Key: "{a}refilled", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 7, Base: "+4000000"}); !r.Limited || r.Remaining != 6 {
			t.Fatalf("a denial carrying 6 left: got %+v", r)
		}
		if r := one(t, lua.Call{Key: "{a}refilled", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0}); r.Remaining != 6 {
			t.Fatalf("after a denial carried the state: got %+v, want its 6 left", r)
		}
		one(t, lua.Call{Key: "{a}emptier", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 8})
		if r := one(t, lua.Call{Key: "{a}emptier", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0, Base: "+4000000"}); r.Remaining != 2 {
			t.Fatalf("a bucket emptier than the carried state: got %+v, want its own 2 left", r)
		}
	})

	t.Run("a new split after a lapse is named anew, with no more tags", func(t *testing.T) {
		// A bucket with state, which the lapsed marker keeps.
		iv, _ := bucket.Limit{Capacity: 10, Refill: 1, Period: 3600_000_000}.Interval()
		one(t, lua.Call{Key: "anew", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 5})
		sp := lua.NewSplitter()
		first, err := sp.Split(ctx, cl, "anew", []string{"a", "b"}, 20*time.Millisecond, -1)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			next, err := sp.Split(ctx, cl, "anew", []string{"x", "y", "z"}, time.Minute, -1)
			if err != nil {
				t.Fatal(err)
			}
			if next.Gen != first.Gen {
				if !slices.Equal(next.Tags, []string{"x", "y"}) {
					t.Fatalf("new split %+v: want tags x,y (no more than the 2 before)", next)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the split did not lapse in 5s")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})

	t.Run("a split of a key that is not a bucket is an error", func(t *testing.T) {
		cl.Do(ctx, cl.B().Set().Key("text2").Value("hello").Build())
		_, err := lua.NewSplitter().Split(ctx, cl, "text2", []string{"a"}, time.Minute, -1)
		if err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
			t.Fatalf("got %v, want WRONGTYPE", err)
		}
		if v, _ := cl.Do(ctx, cl.B().Get().Key("text2").Build()).ToString(); v != "hello" {
			t.Fatalf("text2 is now %q", v)
		}
	})

	t.Run("memory per bucket", func(t *testing.T) {
		iv, _ := bucket.Limit{Capacity: 100, Refill: 10, Period: 1_000_000}.Interval()
		one(t, lua.Call{Key: "sluice:user:1", Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1})
		n, err := cl.Do(ctx, cl.B().MemoryUsage().Key("sluice:user:1").Build()).AsInt64()
		if err != nil || n > 72 {
			t.Fatalf("MEMORY USAGE %d bytes (%v), want <= 72", n, err)
		}
	})
}

func TestHeartbeatCountsLiveInstances(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	hb := lua.NewHeartbeat()
	for i, id := range []string{"a", "b", "a"} {
		n, err := hb.Beat(ctx, cl, "hb", id, time.Hour)
		if want := int64(min(i+1, 2)); err != nil || n != want {
			t.Fatalf("beat %d of %s: %d, %v, want %d", i, id, n, err, want)
		}
	}
	// An instance that stops beating drops out once its announcement ends.
	if _, err := hb.Beat(ctx, cl, "hb2", "gone", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := hb.Beat(ctx, cl, "hb2", "live", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d live instances 5s after one stopped", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
