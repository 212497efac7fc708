package lua_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// What the many path stands on, checked on the Redis it runs on: a script
// without a shebang may reach keys it did not declare, of any slot its node
// serves; a key of any other slot, or any key while the cluster is down, is
// an error redis.pcall catches, in these words (Redis 7.0).
func TestUndeclaredKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s := newShards(t, ctx, clustertest.Config{Replicas: 1})
	const (
		notLocal = "ERR Script attempted to access a non local key in a cluster node"
		down     = "ERR Script attempted to execute a command while the cluster is down"
	)
	// probe SETs and GETs each ARGV and answers what each did.
	const probe = `
local out = {}
for _, k in ipairs(ARGV) do
  for _, r in ipairs({redis.pcall('SET', k, 'v'), redis.pcall('GET', k)}) do
    if type(r) == 'table' then r = r.err or r.ok end
    out[#out + 1] = r
  end
end
return out`
	eval := func(node int, script string, keys []string, args ...string) ([]string, error) {
		c := s.nodes[node]
		return c.Do(ctx, c.B().Eval().Script(script).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()).AsStrSlice()
	}
	want := func(t *testing.T, got []string, err error, want ...string) {
		t.Helper()
		if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	here := s.keysOn(0, 3, "here:") // three slots of node 0
	there := s.keysOn(1, 1, "there:")[0]
	iv, _ := bucket.Limit{Capacity: 5, Refill: 1, Period: 1_000_000}.Interval()

	t.Run("keys of the node's slots, and of another node's", func(t *testing.T) {
		got, err := eval(0, probe, nil, here[0], here[1], there, here[2])
		want(t, got, err, "OK", "v", "OK", "v", notLocal, notLocal, "OK", "v")
		// redis.call raises it, with where it was raised (rueidis drops
		// the "ERR ").
		_, err = eval(0, "return redis.call('GET', ARGV[1])", nil, there)
		if err == nil || !strings.HasPrefix(err.Error(), "Script attempted to access a non local key in a cluster node script: ") {
			t.Fatalf("redis.call: %v", err)
		}
	})

	t.Run("a shebang forbids other slots", func(t *testing.T) {
		// Which is why throttle.lua has none.
		got, err := eval(0, "#!lua\n"+probe, nil, here[0], here[1])
		want(t, got, err, "OK", "v", "ERR Script attempted to access keys that do not hash to the same slot", "ERR Script attempted to access keys that do not hash to the same slot")
		got, err = eval(0, "#!lua flags=allow-cross-slot-keys\n"+probe, nil, here[0], here[1])
		want(t, got, err, "OK", "v", "OK", "v")
		_, err = eval(0, probe, here[:2])
		if err == nil || err.Error() != "CROSSSLOT Keys in request don't hash to the same slot" {
			t.Fatalf("declared keys of two slots: %v", err)
		}
	})

	t.Run("a replica serves none", func(t *testing.T) {
		// Node 3 replicates node 0: what a many call meets after a failover
		// made its node a replica.
		got, err := eval(3, probe, nil, here[0])
		want(t, got, err, "READONLY You can't write against a read only replica.", notLocal)
		out := make([]lua.Outcome, 2)
		lua.NewThrottle().DoMany(ctx, s.nodes[3], []lua.Call{{Key: here[0], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}, {Key: here[1], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 0}}, out)
		for _, o := range out {
			var e *lua.Error
			if !errors.As(o.Err, &e) || !e.IsNotLocal() {
				t.Fatalf("a many call on a replica: %+v, want not local", o)
			}
		}
	})

	t.Run("a slot being migrated", func(t *testing.T) {
		// Node 0 migrates the slot of here[0] to node 1: a key still on node 0
		// is served there, a missing one on neither without ASKING; declared,
		// ASK leads to it.
		th := lua.NewThrottle()
		for _, k := range here[:2] {
			s.cl.Do(ctx, s.cl.B().Del().Key(k).Build())
		}
		missing := fmt.Sprintf("{%s}missing", here[0])
		calls := []lua.Call{{Key: here[0], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}, {Key: missing, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}, {Key: here[1], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}}
		single(ctx, th, s.cl, calls[:1])
		n1 := s.c.Nodes[1]
		if _, err := s.c.StartMove(ctx, slot.Of(here[0]), n1); err != nil {
			t.Fatal(err)
		}
		got, err := eval(0, "return {tostring(redis.pcall('EXISTS', ARGV[1])), redis.pcall('GET', ARGV[2]).err}", nil, here[0], missing)
		want(t, got, err, "1", notLocal)
		got, err = eval(1, "return {redis.pcall('GET', ARGV[1]).err}", nil, missing)
		want(t, got, err, notLocal)

		out := make([]lua.Outcome, len(calls))
		th.DoMany(ctx, s.nodes[0], calls, out)
		var e *lua.Error
		if out[0].Err != nil || out[0].Remaining != 3 || !errors.As(out[1].Err, &e) || !e.IsNotLocal() || out[2].Err != nil || out[2].Remaining != 4 {
			t.Fatalf("a many call on the migrating node: %+v", out)
		}
		if o := single(ctx, th, s.nodes[0], calls[1:2])[0]; !isAsk(o.Err) {
			t.Fatalf("declared, on the migrating node: %+v, want ASK", o)
		}
		if o := single(ctx, th, s.cl, calls[1:2])[0]; o.Err != nil || o.Remaining != 4 {
			t.Fatalf("declared, through the cluster client: %+v", o)
		}
		if err := s.c.MoveSlot(ctx, slot.Of(here[0]), n1); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the cluster down", func(t *testing.T) {
		// Node 2 and its replica gone, node 0 finds the cluster down: a many
		// call there still answers, for each bucket.
		s.c.Nodes[2].Kill()
		s.c.Nodes[5].Kill()
		deadline := time.Now().Add(20 * time.Second)
		for {
			info, _ := s.nodes[0].Do(ctx, s.nodes[0].B().ClusterInfo().Build()).ToString()
			if strings.Contains(info, "cluster_state:fail") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the cluster is not down 20s after a shard went")
			}
			time.Sleep(50 * time.Millisecond)
		}
		got, err := eval(0, probe, nil, here[1])
		want(t, got, err, down, down)
		out := make([]lua.Outcome, 1)
		lua.NewThrottle().DoMany(ctx, s.nodes[0], []lua.Call{{Key: here[1], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}}, out)
		var e *lua.Error
		if !errors.As(out[0].Err, &e) || !e.IsClusterDown() || e.IsNotLocal() {
			t.Fatalf("a many call: %+v, want the cluster down", out[0])
		}
		o := single(ctx, lua.NewThrottle(), s.nodes[0], []lua.Call{{Key: here[1], Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: 1}})[0]
		if re, ok := rueidis.IsRedisErr(o.Err); !ok || !re.IsClusterDown() || re.Error() != "CLUSTERDOWN The cluster is down" {
			t.Fatalf("declared: %v", o.Err)
		}
	})
}

func isAsk(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	_, ask := re.IsAsk()
	return ask
}
