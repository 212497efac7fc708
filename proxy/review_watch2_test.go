package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// Two WATCHes of keys the source of a migrating slot no longer holds,
// pipelined: the second is sent before the first's ASK is in. Both watch
// on the importing node, where the transaction of those keys then runs,
// as after one WATCH of both: a retry loop that pipelines its WATCHes
// makes progress, rather than finding its watch lost at every try until
// the migration ends. A WATCH the source answers itself (its key still
// there) watches there, and the transaction's watch is lost.
func TestWatchesPipelinedBeforeTheirAskRunOnTheImportingNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		t.Run(fmt.Sprintf("loops=%d", loops), func(t *testing.T) {
			k, k2, k3, absent := fmt.Sprintf("{wp%d}k", loops), fmt.Sprintf("{wp%d}k2", loops), fmt.Sprintf("{wp%d}k3", loops), fmt.Sprintf("{wp%d}absent", loops)
			conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
			for _, key := range []string{k, k2, k3} {
				conn.do("SET", key, "0")
			}
			from, to := migrateKey(t, c, k, true)
			if err := c.Migrate(context.Background(), from, to, k2); err != nil {
				t.Fatal(err)
			}
			last := func(cmds ...[]string) string {
				conn.send(cmds...)
				for range len(cmds) - 1 {
					conn.read()
				}
				return conn.read()
			}
			if got := last([]string{"WATCH", k}, []string{"WATCH", k2}, []string{"MULTI"}, []string{"INCR", k}, []string{"INCR", k2}, []string{"EXEC"}); got != "*2\r\n:1\r\n:1\r\n" {
				t.Errorf("WATCH k, WATCH k2 pipelined, both asked: EXEC answered %q, want it run", got)
			}
			if got := last([]string{"WATCH", k}, []string{"WATCH", absent}, []string{"WATCH", k}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"}); got != "*1\r\n:2\r\n" {
				t.Errorf("WATCH k, WATCH of an absent key, WATCH k pipelined: EXEC answered %q, want it run", got)
			}
			if got := last([]string{"WATCH", k}, []string{"WATCH", k3}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"}); got != "*-1\r\n" {
				t.Errorf("WATCH k (asked), WATCH k3 (on the source) pipelined: EXEC answered %q, want the watch lost", got)
			}
			if got := last([]string{"WATCH", k3}, []string{"WATCH", k}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"}); got != "*-1\r\n" {
				t.Errorf("WATCH k3 (on the source), WATCH k (asked) pipelined: EXEC answered %q, want the watch lost", got)
			}
			if got := conn.do("GET", k); got != "$1\r\n2\r\n" {
				t.Errorf("k after the transactions: %q, want 2", got)
			}
		})
	}
}

// A migration rolled back (SETSLOT STABLE, or SETSLOT NODE of the source,
// on both nodes) while a client watches a key on the importing node: its
// transaction never runs there, where another client's write, on the
// source again, is not seen, but finds its watch lost (EXEC null), and
// the client's next try runs on the source. SETSLOT NODE of the source
// leaves the importing node importing (Redis clears that only for a slot
// given to the node itself), so that it would take the transaction, with
// ASKING.
func TestWatchAskedThenTheMigrationRolledBack(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		for _, rollback := range []string{"STABLE", "NODE"} {
			t.Run(fmt.Sprintf("loops=%d/%s", loops, rollback), func(t *testing.T) {
				k := fmt.Sprintf("{wrb%d%s}k", -loops, rollback)
				sl := strconv.Itoa(slot.Of(k))
				addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
				conn, other := dialRaw(t, addr), dialRaw(t, addr)
				from, to := migrateKey(t, c, k, false)
				if got := conn.do("WATCH", k); got != "+OK\r\n" {
					t.Fatalf("WATCH: %q", got)
				}
				if got := conn.do("GET", k); got != "$-1\r\n" {
					t.Fatalf("GET of the watched key, absent: %q", got)
				}
				for _, n := range []*clustertest.Node{to, from} {
					args := []string{"CLUSTER", "SETSLOT", sl, rollback}
					if rollback == "NODE" {
						args = append(args, from.ID)
					}
					if err := n.Do(ctx, args...).Error(); err != nil {
						t.Fatal(err)
					}
				}
				if got := other.do("SET", k, "10"); got != "+OK\r\n" {
					t.Fatalf("another client's SET after the rollback: %q", got)
				}
				conn.send([]string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"})
				conn.read()
				conn.read()
				if got := conn.read(); got != "*-1\r\n" {
					t.Errorf("EXEC after the rollback: %q, want null", got)
				}
				conn.send([]string{"WATCH", k}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"})
				for range 3 {
					conn.read()
				}
				if got := conn.read(); got != "*1\r\n:11\r\n" {
					t.Errorf("EXEC of the next try: %q, want it run on the source", got)
				}
				if got, err := to.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", sl).AsInt64(); err != nil || got != 0 {
					t.Errorf("keys of the slot on the importing node: %d, %v; want none", got, err)
				}
			})
		}
	}
}

// The importing node, or the source, killed while a client watches a key
// on the importing node: EXEC answers null or an error, not waiting for
// ever, and the client's connection serves on, its next transaction on a
// live node's keys watched and run.
func TestWatchAskedThenANodeKilled(t *testing.T) {
	for _, victim := range []string{"importing", "source"} {
		for _, loops := range []int{0, -1} {
			t.Run(fmt.Sprintf("%s/loops=%d", victim, loops), func(t *testing.T) {
				c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
				r := newForwarding(t, c)
				ctx := context.Background()
				k := "{wkill}k"
				from := primaryOf(t, c, k)
				to := otherPrimary(c, from)
				if err := from.Do(ctx, "SET", k, "0").Error(); err != nil {
					t.Fatal(err)
				}
				if _, err := c.StartMove(ctx, slot.Of(k), to); err != nil {
					t.Fatal(err)
				}
				if err := c.Migrate(ctx, from, to, k); err != nil {
					t.Fatal(err)
				}
				live := ""
				for i := 0; live == ""; i++ {
					if n := primaryOf(t, c, fmt.Sprintf("{wlive%d}k", i)); n != from && n != to {
						live = fmt.Sprintf("{wlive%d}k", i)
					}
				}
				conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
				if got := conn.do("WATCH", k); got != "+OK\r\n" {
					t.Fatalf("WATCH: %q", got)
				}
				if got := conn.do("GET", k); got != "$1\r\n0\r\n" {
					t.Fatalf("GET of the watched key on the importing node: %q", got)
				}
				if victim == "importing" {
					to.Kill()
				} else {
					from.Kill()
				}
				conn.send([]string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"})
				conn.read()
				conn.read()
				got := conn.read()
				t.Logf("EXEC after the %s node was killed: %q", victim, got)
				if got != "*-1\r\n" && !strings.HasPrefix(got, "-") {
					t.Errorf("EXEC after the %s node was killed: %q, want null or an error", victim, got)
				}
				if got := conn.do("PING"); got != "+PONG\r\n" {
					t.Errorf("PING after: %q", got)
				}
				conn.send([]string{"WATCH", live}, []string{"MULTI"}, []string{"INCR", live}, []string{"EXEC"})
				for range 3 {
					conn.read()
				}
				if got := conn.read(); got != "*1\r\n:1\r\n" {
					t.Errorf("a transaction on a live node's key after: %q, want it run", got)
				}
			})
		}
	}
}
