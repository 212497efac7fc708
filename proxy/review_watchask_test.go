package proxy_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// While a slot is being migrated, a WATCH of a key its source no longer
// holds watches it on the importing node, where the transaction then runs
// (ASKING first) if its keys are all watched ones: a check-and-set loop on
// that key makes progress, as straight to the cluster, instead of finding
// its watch lost at every try until the migration ends. A transaction
// naming a key not watched, which may still be on the source, loses the
// watch; a write to the watched key between WATCH and EXEC, another
// client's or its own pipelined behind the WATCH, aborts it, as in Redis.
func TestWatchOfAKeyMigratedRunsOnTheImportingNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		t.Run(fmt.Sprintf("loops=%d", loops), func(t *testing.T) {
			k, k2 := fmt.Sprintf("{wa%d}k", loops), fmt.Sprintf("{wa%d}k2", loops)
			addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
			conn, other := dialRaw(t, addr), dialRaw(t, addr)
			conn.do("SET", k, "0")
			conn.do("SET", k2, "0")
			migrateKey(t, c, k, true)
			last := func(cmds ...[]string) string {
				conn.send(cmds...)
				for range len(cmds) - 1 {
					conn.read()
				}
				return conn.read()
			}
			if got := last([]string{"WATCH", k}, []string{"GET", k}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"}); got != "*1\r\n:1\r\n" {
				t.Errorf("WATCH of the migrated key, then INCR of it: EXEC answered %q, want it run", got)
			}
			if got := last([]string{"WATCH", k}, []string{"MULTI"}, []string{"INCR", k2}, []string{"EXEC"}); got != "*-1\r\n" {
				t.Errorf("INCR of a key not watched, still on the source: EXEC answered %q, want the watch lost", got)
			}
			if got := conn.do("GET", k2); got != "$1\r\n0\r\n" {
				t.Errorf("the key not watched after its transaction was refused: %q", got)
			}
			if got := conn.do("WATCH", k); got != "+OK\r\n" {
				t.Fatalf("WATCH: %q", got)
			}
			if got := other.do("INCR", k); got != ":2\r\n" {
				t.Fatalf("another client's INCR: %q", got)
			}
			if got := last([]string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"}); got != "*-1\r\n" {
				t.Errorf("EXEC after another client wrote the watched key: %q, want null", got)
			}
			if got := last([]string{"WATCH", k}, []string{"SET", k, "7"}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"}); got != "*-1\r\n" {
				t.Errorf("EXEC after its own write to the watched key: %q, want null", got)
			}
			if got := conn.do("GET", k); got != "$1\r\n7\r\n" {
				t.Errorf("the watched key after the aborted transactions: %q, want 7", got)
			}
		})
	}
}

// migrateKey starts moving key's slot from its primary to another and,
// with move, moves key itself: the slot is being migrated, key (if moved)
// on the importing node. The migration ends with the test, if it has not.
func migrateKey(t *testing.T, c *clustertest.Cluster, key string, move bool) (from, to *clustertest.Node) {
	t.Helper()
	ctx := context.Background()
	from = primaryOf(t, c, key)
	to = otherPrimary(c, from)
	if _, err := c.StartMove(ctx, slot.Of(key), to); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.MoveSlot(ctx, slot.Of(key), to); err != nil {
			t.Error(err)
		}
	})
	if move {
		if err := c.Migrate(ctx, from, to, key); err != nil {
			t.Fatal(err)
		}
	}
	return from, to
}
