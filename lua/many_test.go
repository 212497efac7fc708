package lua_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
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
	"github.com/sluice-rl/sluice/router/slot"
)

// shards is a cluster with a client of each primary and the slot map.
type shards struct {
	c     *clustertest.Cluster
	cl    rueidis.Client   // the cluster
	nodes []rueidis.Client // one per primary, as c.Nodes
	owner [clustertest.Slots]int
}

func newShards(t *testing.T, ctx context.Context, cfg clustertest.Config) *shards {
	t.Helper()
	s := &shards{c: clustertest.New(t, cfg)}
	var err error
	if s.cl, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: s.c.Addrs(), DisableCache: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.cl.Close)
	for _, n := range s.c.Nodes {
		nc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{n.Addr}, ForceSingleClient: true, DisableCache: true, DisableRetry: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		s.nodes = append(s.nodes, nc)
	}
	for sl := range s.owner {
		s.owner[sl] = -1
	}
	ranges, err := s.cl.Do(ctx, s.cl.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ranges {
		v, _ := r.ToArray()
		lo, _ := v[0].AsInt64()
		hi, _ := v[1].AsInt64()
		p, _ := v[2].ToArray()
		host, _ := p[0].ToString()
		port, _ := p[1].AsInt64()
		i := slices.IndexFunc(s.c.Nodes, func(n *clustertest.Node) bool { return n.Addr == net.JoinHostPort(host, strconv.FormatInt(port, 10)) })
		for sl := lo; sl <= hi; sl++ {
			s.owner[sl] = i
		}
	}
	return s
}

// keysOn returns n keys served by node i, each of a slot of its own.
func (s *shards) keysOn(i, n int, prefix string) []string {
	var keys []string
	seen := map[int]bool{}
	for k := 0; len(keys) < n; k++ {
		key := prefix + strconv.Itoa(k)
		if sl := slot.Of(key); s.owner[sl] == i && !seen[sl] {
			seen[sl] = true
			keys = append(keys, key)
		}
	}
	return keys
}

// shardNow is the cluster's clock in µs plus ahead: virtual time ahead of
// the shards' clocks, so that keys (PXAT at their virtual full instant)
// never expire under a test's steps.
func (s *shards) shardNow(t *testing.T, ctx context.Context, ahead time.Duration) int64 {
	t.Helper()
	tm, err := s.cl.Do(ctx, s.cl.B().Time().Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	us, _ := strconv.ParseInt(tm[1], 10, 64)
	return sec*1_000_000 + us + ahead.Microseconds()
}

func (s *shards) get(ctx context.Context, key string) string {
	v, _ := s.cl.Do(ctx, s.cl.B().Get().Key(key).Build()).ToString()
	return v
}

func (s *shards) expireAt(ctx context.Context, key string) int64 {
	v, _ := s.cl.Do(ctx, s.cl.B().Pexpiretime().Key(key).Build()).AsInt64()
	return v
}

// single runs calls through the declared path and returns them as Outcomes.
func single(ctx context.Context, th *lua.Throttle, cl rueidis.Client, calls []lua.Call) []lua.Outcome {
	res, taken, errs := make([]lua.Result, len(calls)), make([]int64, len(calls)), make([]error, len(calls))
	th.DoBatch(ctx, cl, calls, res, taken, errs)
	out := make([]lua.Outcome, len(calls))
	for i := range out {
		out[i] = lua.Outcome{Result: res[i], Taken: taken[i], Err: errs[i]}
	}
	return out
}

func TestManyOnCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s := newShards(t, ctx, clustertest.Config{Replicas: -1})
	th := lua.NewThrottle()
	many := func(t *testing.T, node int, calls ...lua.Call) []lua.Outcome {
		t.Helper()
		out := make([]lua.Outcome, len(calls))
		th.DoMany(ctx, s.nodes[node], calls, out)
		return out
	}
	limit := func(capacity, refill, period int64) bucket.Interval {
		iv, err := bucket.Limit{Capacity: capacity, Refill: refill, Period: period}.Interval()
		if err != nil {
			t.Fatal(err)
		}
		return iv
	}

	t.Run("the vectors give the single path's answers", func(t *testing.T) {
		// Step i of every case in one call: the buckets' own clocks (8
		// ARGV a bucket), keys of as many slots on one node; the same
		// steps declared on twin keys.
		start := s.shardNow(t, ctx, 10*time.Minute)
		cases := buckettest.Cases()
		keys := s.keysOn(0, len(cases), "vec:many:")
		for i := 0; ; i++ {
			var calls []lua.Call
			var want [][4]int64
			for ci, vc := range cases {
				if i >= len(vc.Steps) {
					continue
				}
				st := vc.Steps[i]
				iv, err := vc.LimitAt(st).Interval()
				if err != nil {
					t.Fatal(err)
				}
				calls = append(calls, lua.Call{Key: keys[ci], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: st.Cost, Now: start + st.T})
				want = append(want, st.Want)
			}
			if len(calls) == 0 {
				break
			}
			got := many(t, 0, calls...)
			twins := slices.Clone(calls)
			for k := range twins {
				twins[k].Key = "vec:single:" + twins[k].Key
			}
			declared := single(ctx, th, s.cl, twins)
			for k, o := range got {
				if o.Err != nil || buckettest.Got(bucket.Result(o.Result)) != want[k] || o != declared[k] {
					t.Fatalf("step %d of %s: many %+v, declared %+v; want %v", i, calls[k].Key, o, declared[k], want[k])
				}
				if a, b := s.get(ctx, calls[k].Key), s.get(ctx, twins[k].Key); a != b || s.expireAt(ctx, calls[k].Key) != s.expireAt(ctx, twins[k].Key) {
					t.Fatalf("step %d of %s: stored %q, declared %q", i, calls[k].Key, a, b)
				}
			}
		}
	})

	t.Run("keys of many slots on one node, on the shard's clock", func(t *testing.T) {
		iv := limit(10, 1, 1_000_000)
		keys := s.keysOn(1, 64, "slots:")
		calls := make([]lua.Call, len(keys))
		for i, k := range keys {
			calls[i] = lua.Call{Key: k, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1 + int64(i%3)}
		}
		for i, o := range many(t, 1, calls...) {
			want := lua.Result{Remaining: 10 - calls[i].Cost, RetryAfter: -1, ResetAfter: calls[i].Cost * 1_000_000}
			if o.Err != nil || o.Result != want || o.Taken != 1 {
				t.Fatalf("%s: %+v, want %+v", keys[i], o, want)
			}
			// Stored on the shard's clock, which is this machine's.
			tat, _ := strconv.ParseInt(s.get(ctx, keys[i]), 10, 64)
			if d := time.Until(time.Unix(0, tat)); d < time.Duration(calls[i].Cost-1)*time.Second || d > time.Duration(calls[i].Cost)*time.Second {
				t.Fatalf("%s: TAT %d is %v from now, want %ds", keys[i], tat, d, calls[i].Cost)
			}
			if at := s.expireAt(ctx, keys[i]); at != buckettest.ExpireAt(tat) {
				t.Fatalf("%s: expires at %d, want %d", keys[i], at, buckettest.ExpireAt(tat))
			}
		}
	})

	t.Run("a key of another node is reported, the others decided", func(t *testing.T) {
		iv := limit(5, 1, 1_000_000)
		here, there := s.keysOn(0, 2, "mixed:here:"), s.keysOn(2, 1, "mixed:there:")
		calls := []lua.Call{
			{Key: here[0], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1},
			{Key: there[0], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1},
			{Key: here[1], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 2},
		}
		out := many(t, 0, calls...)
		var e *lua.Error
		if !errors.As(out[1].Err, &e) || !e.IsNotLocal() || e.IsClusterDown() || out[1].Result != (lua.Result{}) {
			t.Fatalf("the other node's key: %+v, want not local", out[1])
		}
		if out[0].Err != nil || out[0].Remaining != 4 || out[2].Err != nil || out[2].Remaining != 3 {
			t.Fatalf("this node's keys: %+v, %+v; want 4 and 3 left", out[0], out[2])
		}
		if n, _ := s.cl.Do(ctx, s.cl.B().Exists().Key(there[0]).Build()).AsInt64(); n != 0 {
			t.Fatal("the other node's key was written")
		}
		// Sent again, declared, it is decided where it lives.
		if o := single(ctx, th, s.cl, calls[1:2])[0]; o.Err != nil || o.Remaining != 4 {
			t.Fatalf("declared: %+v", o)
		}
	})

	t.Run("a split and a value that is not a bucket are answers of their own", func(t *testing.T) {
		iv := limit(5, 1, 3600_000_000)
		keys := s.keysOn(0, 7, "answers:")
		parent, hash, text, digits := keys[1], keys[2], keys[3], keys[4]
		single(ctx, th, s.cl, []lua.Call{{Key: parent, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 2}})
		sp, err := lua.NewSplitter().Split(ctx, s.cl, parent, []string{"a", "b"}, time.Minute, -1)
		if err != nil {
			t.Fatal(err)
		}
		s.cl.Do(ctx, s.cl.B().Hset().Key(hash).FieldValue().FieldValue("f", "v").Build())
		s.cl.Do(ctx, s.cl.B().Set().Key(text).Value("hello, not a bucket").Build())
		s.cl.Do(ctx, s.cl.B().Set().Key(digits).Value("12345").Build())
		calls := make([]lua.Call, len(keys))
		for i, k := range keys {
			calls[i] = lua.Call{Key: k, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}
		}
		calls[6].Key = keys[0] // and the first one again
		out := many(t, 0, calls...)
		var se *lua.SplitError
		if !errors.As(out[1].Err, &se) || se.Split.Gen != sp.Gen || se.Split.Base != sp.Base || se.Split.TTL < 59*time.Second {
			t.Fatalf("the split parent: %+v, want %+v", out[1], sp)
		}
		for _, i := range []int{2, 3, 4} {
			var e *lua.Error
			if !errors.As(out[i].Err, &e) || !e.IsWrongType() {
				t.Fatalf("%s: %+v, want WRONGTYPE", keys[i], out[i])
			}
		}
		if out[0].Err != nil || out[0].Remaining != 4 || out[5].Err != nil || out[5].Remaining != 4 || out[6].Err != nil || out[6].Remaining != 3 {
			t.Fatalf("the buckets: %+v %+v %+v, want 4, 4 and 3 left", out[0], out[5], out[6])
		}
		if v := s.get(ctx, text); v != "hello, not a bucket" {
			t.Fatalf("text is now %q", v)
		}
	})

	t.Run("a bucket twice in a call is decided twice, in order", func(t *testing.T) {
		iv := limit(3, 1, 3600_000_000)
		k := s.keysOn(2, 2, "twice:")
		calls := []lua.Call{
			{Key: k[0], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1},
			{Key: k[1], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 3},
			{Key: k[0], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0},
			{Key: k[0], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 2},
			{Key: k[0], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1},
			{Key: k[1], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1, N: 2},
		}
		out := many(t, 2, calls...)
		for i, want := range []struct {
			limited          bool
			remaining, taken int64
		}{{false, 2, 1}, {false, 0, 1}, {false, 2, 1}, {false, 0, 1}, {true, 0, 0}, {true, 0, 0}} {
			if o := out[i]; o.Err != nil || o.Limited != want.limited || o.Remaining != want.remaining || o.Taken != want.taken {
				t.Fatalf("call %d: %+v, want %+v", i, o, want)
			}
		}
	})

	t.Run("n calls and a base decide as the declared path does", func(t *testing.T) {
		start := s.shardNow(t, ctx, 10*time.Minute)
		iv := limit(10, 3, 1_000_000)
		keys := s.keysOn(1, 4, "nbase:")
		_, base := bucket.Take(0, start, iv, 6) // 4 of 10 left
		var calls []lua.Call
		for _, k := range keys {
			calls = append(calls, lua.Call{Key: k, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1, N: 3, Base: strconv.FormatInt(base, 10), Now: start + 100_000})
		}
		calls[1].N, calls[2].Base, calls[3].Cost = 9, "0", 2
		for round := range 3 {
			for i := range calls {
				calls[i].Now += 200_000
			}
			twins := slices.Clone(calls)
			for i := range twins {
				twins[i].Key = "twin:" + twins[i].Key
			}
			got, want := many(t, 1, calls...), single(ctx, th, s.cl, twins)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: many %+v, declared %+v", round, got, want)
			}
		}
	})

	t.Run("random steps: many, declared and Go agree", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 11))
		periods := []int64{1, 7, 333_333, 1_000_000, 60_000_000, 3600_000_000, 86400_000_000}
		keys := s.keysOn(2, 24, "random:")
		type state struct {
			ivs [2]bucket.Interval // a key is asked under two limits
			tat int64
		}
		st := make([]state, len(keys))
		for i := range st {
			for j := range st[i].ivs {
				for {
					iv, err := bucket.Limit{Capacity: rng.Int64N(1000) + 1, Refill: rng.Int64N(1000) + 1, Period: periods[rng.IntN(len(periods))]}.Interval()
					if err == nil {
						st[i].ivs[j] = iv
						break
					}
				}
			}
		}
		now := s.shardNow(t, ctx, 10*time.Minute)
		for round := range 60 {
			now += rng.Int64N(3_000_000)
			calls := make([]lua.Call, 1+rng.IntN(32))
			want := make([]lua.Outcome, len(calls))
			for i := range calls {
				k := rng.IntN(len(keys))
				iv := st[k].ivs[rng.IntN(8)/7] // mostly the first limit
				c := lua.Call{Key: keys[k], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: rng.Int64N(iv.Capacity + 2), N: 1 + rng.Int64N(3), Now: now}
				if rng.IntN(4) == 0 {
					c.Cost = min(c.Cost, 1)
				}
				calls[i] = c
				for range c.N {
					r, store := bucket.Take(st[k].tat, now, iv, c.Cost)
					if store != 0 {
						st[k].tat = store
					}
					if !r.Limited {
						want[i].Taken++
					}
					want[i].Result = lua.Result(r)
				}
			}
			got := many(t, 2, calls...)
			twins := slices.Clone(calls)
			for i := range twins {
				twins[i].Key = "twin:" + twins[i].Key
			}
			declared := single(ctx, th, s.cl, twins)
			for i := range calls {
				if got[i] != want[i] || declared[i] != want[i] {
					t.Fatalf("round %d, call %d %+v: many %+v, declared %+v, Go %+v", round, i, calls[i], got[i], declared[i], want[i])
				}
			}
		}
	})

	t.Run("a malformed call", func(t *testing.T) {
		// A bucket whose numbers do not parse is an answer of its own; a
		// call that is not a many call is an error, before any write.
		k := s.keysOn(0, 2, "malformed:")
		eval := func(args ...string) rueidis.RedisResult {
			return s.nodes[0].Do(ctx, s.nodes[0].B().Eval().Script(lua.ThrottleSource()).Numkeys(0).Arg(args...).Build())
		}
		// The fourth has the third's numbers ("="); the second's "=" would
		// be the first's.
		v, err := eval("2", k[0], "5", "1", "1", "1", "", "1", "0", k[1], "5", "x", "1", "1", "", "1", "0",
			k[0], "5", "1", "1", "1", "", "1", "0", k[0], "=").ToArray()
		if err != nil || len(v) != 20 {
			t.Fatalf("got %v, %v", v, err)
		}
		code, _ := v[5].AsInt64()
		msg, _ := v[6].ToString()
		first, _ := v[1].AsInt64()
		third, _ := v[11].AsInt64()
		fourth, _ := v[16].AsInt64()
		if code != 3 || !strings.HasPrefix(msg, "ERR sluice: ") || first != 4 || third != 3 || fourth != 2 {
			t.Fatalf("got %v, want the second bucket refused and the others deciding", v)
		}
		for _, args := range [][]string{{"9", k[0]}, {"2", k[0], "5", "1", "1", "1", ""}, {"2", k[0], "="},
			{"2", k[0], "5", "1", "1", "1", "", "1", "0", k[1]}, {"7", k[0], "5", "1", "1", "1", "", "1"}, {}} {
			if err := eval(args...).Error(); err == nil || !strings.Contains(err.Error(), "sluice: a many-bucket call") {
				t.Fatalf("%q: %v, want an error", args, err)
			}
		}
	})

	t.Run("EVAL after the node forgot the script", func(t *testing.T) {
		iv := limit(2, 1, 1_000_000)
		k := s.keysOn(0, 1, "forgot:")[0]
		if err := s.c.Nodes[0].Do(ctx, "SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatal(err)
		}
		if o := many(t, 0, lua.Call{Key: k, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}); o[0].Err != nil || o[0].Remaining != 1 {
			t.Fatalf("got %+v", o[0])
		}
	})

	t.Run("the previous script's buckets and answers", func(t *testing.T) {
		// A bucket written by the script as it was before, or by both in
		// turn, answers as one written by this one, and stores the same.
		prev, err := os.ReadFile("testdata/throttle-prev.lua")
		if err != nil {
			t.Fatal(err)
		}
		eval := func(src, key string, c lua.Call) string {
			base := c.Base
			if base == "" {
				base = "0"
			}
			args := []string{strconv.FormatInt(c.Capacity, 10), strconv.FormatInt(c.U, 10), strconv.FormatInt(c.V, 10),
				strconv.FormatInt(c.Cost, 10), base, strconv.FormatInt(max(c.N, 1), 10), strconv.FormatInt(c.Now, 10)}
			r := s.cl.Do(ctx, s.cl.B().Eval().Script(src).Numkeys(1).Key(key).Arg(args...).Build())
			if err := r.Error(); err != nil {
				return "error: " + err.Error()
			}
			v, _ := r.ToAny()
			return fmt.Sprint(v)
		}
		rng := rand.New(rand.NewPCG(3, 5))
		iv := limit(20, 7, 1_000_000)
		now := s.shardNow(t, ctx, 10*time.Minute)
		for round := range 300 {
			now += rng.Int64N(400_000)
			c := lua.Call{Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: rng.Int64N(4), N: 1 + rng.Int64N(4)*rng.Int64N(2), Now: now}
			if rng.IntN(8) == 0 {
				c.Cost = rng.Int64N(23) // up to more than the bucket holds
			}
			if rng.IntN(3) == 0 {
				// From full to emptier than this limit can be (3s).
				c.Base = strconv.FormatInt(now*1000-1_000_000_000+rng.Int64N(5_000_000_000), 10)
			}
			a, b := eval(string(prev), "{compat}prev", c), eval(lua.ThrottleSource(), "{compat}this", c)
			var mixed string
			if rng.IntN(2) == 0 {
				mixed = eval(string(prev), "{compat}mixed", c)
			} else {
				mixed = eval(lua.ThrottleSource(), "{compat}mixed", c)
			}
			if a != b || a != mixed {
				t.Fatalf("round %d %+v: previous %s, this %s, mixed %s", round, c, a, b, mixed)
			}
			if sa, sb, sm := s.get(ctx, "{compat}prev"), s.get(ctx, "{compat}this"), s.get(ctx, "{compat}mixed"); sa != sb || sa != sm {
				t.Fatalf("round %d: stored %s, %s, %s", round, sa, sb, sm)
			}
			if ea, eb, em := s.expireAt(ctx, "{compat}prev"), s.expireAt(ctx, "{compat}this"), s.expireAt(ctx, "{compat}mixed"); ea != eb || ea != em {
				t.Fatalf("round %d: expire at %d, %d, %d", round, ea, eb, em)
			}
		}
		// Splits and values that are not buckets answer alike too.
		sp := lua.NewSplitter()
		if _, err := sp.Split(ctx, s.cl, "{compat}this", []string{"a"}, time.Minute, -1); err != nil {
			t.Fatal(err)
		}
		s.cl.Do(ctx, s.cl.B().Hset().Key("{compat}hash").FieldValue().FieldValue("f", "v").Build())
		s.cl.Do(ctx, s.cl.B().Set().Key("{compat}text").Value("1234567890123456789x").Build())
		// On the shard's clock, to read the split's time left alike.
		real := s.shardNow(t, ctx, 0)
		for _, k := range []string{"{compat}this", "{compat}hash", "{compat}text"} {
			c := lua.Call{Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1, Now: real}
			if a, b := eval(string(prev), k, c), eval(lua.ThrottleSource(), k, c); a != b {
				t.Fatalf("%s: previous %s, this %s", k, a, b)
			}
		}
	})
}
