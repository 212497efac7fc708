package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// THROTTLE on buckets whose slot is being moved, on one cluster.
func TestThrottleWhileSlotsMigrate(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	t.Run("exact", func(t *testing.T) { throttleExactWhileItsSlotMigrates(t, c, r) })
	t.Run("order", func(t *testing.T) { throttleOrderOnAMigratedBucket(t, c, r) })
	t.Run("passthrough", func(t *testing.T) { passthroughWhileItsSlotMigrates(t, c, r) })
	t.Run("order after SCRIPT FLUSH", func(t *testing.T) { throttleOrderAfterScriptFlush(t, c, r) })
	// Nothing of a migration is a shard's fault.
	for _, s := range r.Stats().Cluster.Shards {
		if !s.Healthy || s.Errors > 0 {
			t.Errorf("shard %s: healthy %v, %d faults (%v, the last %q)", s.Addr, s.Healthy, s.Errors, s.ErrorKinds, s.LastError)
		}
	}
}

// Buckets of one slot are taken from, in pipelines that also hold a
// bucket of another slot of the same node, while the slot is migrated a
// key at a time (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE): each
// bucket loses exactly one token per call wherever it lives, none is
// decided on both nodes (MIGRATE refuses a key the target already
// holds), nothing reaches the fallback, and no redirect reaches the
// client. Both serving paths.
func throttleExactWhileItsSlotMigrates(t *testing.T, c *clustertest.Cluster, r *router.Cluster) {
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		tag := "{tmig" + strconv.Itoa(-loops) + "}"
		names := []string{"a", "b", "c"}
		k := func(name string) string { return tag + name }
		sl, from, to := slotMove(t, c, tag)
		// A bucket of another slot of the old owner, batched with them.
		near := keyWhere(t, c, "near"+strconv.Itoa(-loops), "", func(n *clustertest.Node, key string) bool {
			return n == from && slot.Of(key) != sl
		})
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		conn := dialRaw(t, addr)
		left := map[string]int{near: 100}
		for _, n := range names {
			left[k(n)] = 100
		}
		fallbacks := func() int64 {
			d := r.Stats().Cluster.Decisions
			return d[router.SourceLocal] + d[router.SourceOpen] + d[router.SourceClosed]
		}
		fb := fallbacks()
		round := func(what string, times int) {
			t.Helper()
			var cmds [][]string
			var order []string
			for range times {
				for _, key := range append([]string{near}, k("a"), k("b"), k("c")) {
					cmds = append(cmds, []string{"THROTTLE", key, "100", "1", "1h"})
					order = append(order, key)
				}
			}
			conn.send(cmds...)
			for _, key := range order {
				left[key]--
				want := fmt.Sprintf("*5\r\n:0\r\n:100\r\n:%d\r\n:-1\r\n:", left[key])
				if got := conn.read(); !strings.HasPrefix(got, want) {
					t.Fatalf("loops %d, %s: THROTTLE %s answered %q, want %q...", loops, what, key, got, want)
				}
			}
		}
		migrate := func(key string) {
			t.Helper()
			if err := c.Migrate(ctx, from, to, key); err != nil {
				t.Fatalf("loops %d: %v", loops, err)
			}
		}
		round("before the move", 3)
		if _, err := c.StartMove(ctx, sl, to); err != nil {
			t.Fatal(err)
		}
		round("the slot being moved, no key migrated", 3)
		migrate(k("a"))
		round("a migrated", 3)
		// The importing node forgot the script: ASKING must precede the
		// EVAL that loads it again too.
		if got, err := nodeDo(to, "SCRIPT", "FLUSH"); got != "+OK\r\n" {
			t.Fatalf("SCRIPT FLUSH: %q %v", got, err)
		}
		round("a migrated, the importing node without the script", 2)
		migrate(k("b"))
		round("a and b migrated", 3)
		// THROTTLE.RESET reaches each bucket where it is: a migrated one
		// on the importing node, one not migrated on the old owner.
		for key, want := range map[string]string{k("a"): ":1\r\n", k("c"): ":1\r\n", k("none"): ":0\r\n"} {
			if got := conn.do("THROTTLE.RESET", key); got != want {
				t.Fatalf("loops %d: THROTTLE.RESET %s during the move: %q, want %q", loops, key, got, want)
			}
			left[key] = 100
		}
		delete(left, k("none"))
		round("a and c reset", 2)
		if err := c.MoveSlot(ctx, sl, to); err != nil {
			t.Fatalf("loops %d: ending the move: %v", loops, err)
		}
		round("after the move", 3)
		if n := fallbacks() - fb; n > 0 {
			t.Fatalf("loops %d: %d decisions by the fallback (shards %+v)", loops, n, r.Stats().Cluster.Shards)
		}
		for _, n := range names {
			if got, _ := nodeDo(from, "EXISTS", router.KeyPrefix+k(n)); !strings.HasPrefix(got, "-MOVED") {
				t.Errorf("loops %d: EXISTS %s on the old owner: %q", loops, k(n), got)
			}
		}
	}
}

// One client pipelines many THROTTLE of a bucket that was migrated while
// its slot is still being moved (the old owner answers the loops' script
// "non local key" for it): the calls are decided in the order they were
// sent, as they are on a slot that does not move.
func throttleOrderOnAMigratedBucket(t *testing.T, c *clustertest.Cluster, r *router.Cluster) {
	ctx := context.Background()
	for _, loops := range []int{-1, 0} {
		key := "{tord" + strconv.Itoa(-loops) + "}k"
		sl, from, to := slotMove(t, c, key)
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		conn := dialRaw(t, addr)
		if got := conn.do("THROTTLE", key, "1000", "1", "1h"); !strings.HasPrefix(got, "*5\r\n:0\r\n:1000\r\n:999\r\n") {
			t.Fatalf("first call: %q", got)
		}
		if _, err := c.StartMove(ctx, sl, to); err != nil {
			t.Fatal(err)
		}
		if err := c.Migrate(ctx, from, to, router.KeyPrefix+key); err != nil {
			t.Fatal(err)
		}
		const n = 300
		cmds := make([][]string, n)
		for i := range cmds {
			cmds[i] = []string{"THROTTLE", key, "1000", "1", "1h"}
		}
		conn.send(cmds...)
		for i := range n {
			want := fmt.Sprintf("*5\r\n:0\r\n:1000\r\n:%d\r\n:-1\r\n:", 998-i)
			if got := conn.read(); !strings.HasPrefix(got, want) {
				t.Fatalf("loops %d: call %d answered %q, want %q...", loops, i, got, want)
			}
		}
		if err := c.MoveSlot(ctx, sl, to); err != nil {
			t.Fatal(err)
		}
	}
}

// The same after SCRIPT FLUSH on the bucket's node, which refuses the
// loops' script calls in flight as a whole (NOSCRIPT): decided again, in
// the order they were sent.
func throttleOrderAfterScriptFlush(t *testing.T, c *clustertest.Cluster, r *router.Cluster) {
	ctx := context.Background()
	key := "{tflush}k"
	owner, err := c.Primary(ctx, slot.Of(key))
	if err != nil {
		t.Fatal(err)
	}
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	if got := conn.do("THROTTLE", key, "1000", "1", "1h"); !strings.HasPrefix(got, "*5\r\n:0\r\n:1000\r\n:999\r\n") {
		t.Fatalf("first call: %q", got)
	}
	if got, err := nodeDo(owner, "SCRIPT", "FLUSH"); got != "+OK\r\n" {
		t.Fatalf("SCRIPT FLUSH: %q %v", got, err)
	}
	const n = 300
	cmds := make([][]string, n)
	for i := range cmds {
		cmds[i] = []string{"THROTTLE", key, "1000", "1", "1h"}
	}
	conn.send(cmds...)
	for i := range n {
		want := fmt.Sprintf("*5\r\n:0\r\n:1000\r\n:%d\r\n:-1\r\n:", 998-i)
		if got := conn.read(); !strings.HasPrefix(got, want) {
			t.Fatalf("call %d answered %q, want %q...", i, got, want)
		}
	}
}

// Ordinary commands on a slot half moved: a migrated key is followed
// (ASK, then ASKING on the importing node), a key not migrated stays on
// the old owner, and a command whose keys the migration split answers
// TRYAGAIN, as Redis Cluster does; the values are where MIGRATE then
// finds them. Both serving paths, split multi-key commands (MGET, DEL)
// included.
func passthroughWhileItsSlotMigrates(t *testing.T, c *clustertest.Cluster, r *router.Cluster) {
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		tag := "{pmig" + strconv.Itoa(-loops) + "}"
		k := func(name string) string { return tag + name }
		sl, from, to := slotMove(t, c, tag)
		elsewhere := keyWhere(t, c, "pelse"+strconv.Itoa(-loops), "", func(n *clustertest.Node, key string) bool { return n != from })
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		for _, kv := range [][]string{{k("moved"), "m"}, {k("stays"), "s"}, {k("stays2"), "0"}, {elsewhere, "e"}} {
			if got := conn.do("SET", kv[0], kv[1]); got != "+OK\r\n" {
				t.Fatalf("SET %s: %q", kv[0], got)
			}
		}
		if _, err := c.StartMove(ctx, sl, to); err != nil {
			t.Fatal(err)
		}
		if err := c.Migrate(ctx, from, to, k("moved")); err != nil {
			t.Fatal(err)
		}
		const tryagain = "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
		for _, step := range []struct {
			cmd  []string
			want string
		}{
			{[]string{"GET", k("moved")}, "$1\r\nm\r\n"},
			{[]string{"GET", k("stays")}, "$1\r\ns\r\n"},
			{[]string{"APPEND", k("moved"), "2"}, ":2\r\n"},
			{[]string{"SET", k("new"), "n"}, "+OK\r\n"},
			{[]string{"GET", k("new")}, "$1\r\nn\r\n"},
			{[]string{"MGET", k("moved"), k("new")}, "*2\r\n$2\r\nm2\r\n$1\r\nn\r\n"},
			{[]string{"MGET", k("moved"), k("stays")}, tryagain},
			{[]string{"MGET", elsewhere, k("moved"), k("stays")}, tryagain},
			{[]string{"MGET", elsewhere, k("moved")}, "*2\r\n$1\r\ne\r\n$2\r\nm2\r\n"},
			{[]string{"EXISTS", k("stays"), k("moved"), elsewhere}, tryagain},
			{[]string{"MSET", k("x"), "1", k("y"), "2"}, tryagain},
			{[]string{"DEL", k("moved"), k("stays")}, tryagain},
			// Split, its part on another node ran: a client retrying the
			// whole DEL would count that key's deletion no more. A read
			// (the MGET above) is retried harmlessly.
			{[]string{"DEL", k("moved"), k("stays"), elsewhere}, "-ERR sluice: only part of the command ran: TRYAGAIN Multiple keys request during rehashing of slot\r\n"},
			{[]string{"EVAL", "return redis.call('GET', KEYS[1])", "1", k("moved")}, "$2\r\nm2\r\n"},
		} {
			if got := conn.do(step.cmd...); got != step.want {
				t.Errorf("loops %d: %q answered %q, want %q", loops, step.cmd, got, step.want)
			}
		}
		// Pipelined, a migrated key's commands (ASK) keep their order
		// with each other and with the old owner's.
		var cmds [][]string
		for range 100 {
			cmds = append(cmds, []string{"INCR", k("n")}, []string{"INCR", k("stays2")})
		}
		conn.send(cmds...)
		for i := range 100 {
			for _, key := range []string{k("n"), k("stays2")} {
				if got, want := conn.read(), fmt.Sprintf(":%d\r\n", i+1); got != want {
					t.Fatalf("loops %d: pipelined INCR %s number %d answered %q, want %q", loops, key, i+1, got, want)
				}
			}
		}
		if err := c.MoveSlot(ctx, sl, to); err != nil {
			t.Fatalf("loops %d: ending the move: %v", loops, err)
		}
		if got := conn.do("MGET", k("moved"), k("stays"), k("new"), k("x")); got != "*4\r\n$2\r\nm2\r\n$1\r\ns\r\n$1\r\nn\r\n$-1\r\n" {
			t.Errorf("loops %d: after the move, MGET answered %q", loops, got)
		}
	}
}

// slotMove is key's slot, the primary that owns it, and another primary
// to move it to.
func slotMove(t *testing.T, c *clustertest.Cluster, key string) (int, *clustertest.Node, *clustertest.Node) {
	t.Helper()
	sl := slot.Of(key)
	from, err := c.Primary(context.Background(), sl)
	if err != nil {
		t.Fatal(err)
	}
	to := otherPrimary(c, from)
	return sl, from, to
}
