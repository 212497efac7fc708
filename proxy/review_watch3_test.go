package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A client watching on the importing node keys of two slots, both being
// migrated there from one source, or a key of a slot the importing node
// owns beside the migrated one: its transaction runs there, as with one
// slot watched, rather than finding its watch lost at every try until
// the migrations end. A rollback of either watched slot's migration, and
// a write of its key on the source, loses the watch: EXEC answers null,
// whichever slot the transaction's keys are in.
func TestWatchAskedInTwoSlotsRunsOnTheImportingNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		for _, second := range []string{"migrating", "owned", "rolledback"} {
			t.Run(fmt.Sprintf("loops=%d/%s", loops, second), func(t *testing.T) {
				k := fmt.Sprintf("{w2s%d%s}k", -loops, second)
				from := primaryOf(t, c, k)
				to := otherPrimary(c, from)
				// k2: a key of another slot, of from ("migrating",
				// "rolledback") or of to ("owned").
				owner := from
				if second == "owned" {
					owner = to
				}
				k2 := ""
				for i := 0; k2 == ""; i++ {
					key := fmt.Sprintf("{w2s%d%s%d}k2", -loops, second, i)
					if slot.Of(key) != slot.Of(k) && primaryOf(t, c, key) == owner {
						k2 = key
					}
				}
				addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
				conn, other := dialRaw(t, addr), dialRaw(t, addr)
				conn.do("SET", k, "0")
				migrateKey(t, c, k, true)
				switch second {
				case "migrating":
					conn.do("SET", k2, "0")
					migrateKey(t, c, k2, true)
				case "rolledback":
					// Absent, so that the source sends its WATCH on (ASK),
					// and the importing node has no copy of it that the
					// migration's end would refuse to overwrite.
					migrateKey(t, c, k2, false)
				}
				for _, key := range []string{k, k2} {
					if got := conn.do("WATCH", key); got != "+OK\r\n" {
						t.Fatalf("WATCH %s: %q", key, got)
					}
				}
				want := "*1\r\n:1\r\n"
				if second == "rolledback" {
					sl := strconv.Itoa(slot.Of(k2))
					for _, n := range []*clustertest.Node{to, from} {
						if err := n.Do(ctx, "CLUSTER", "SETSLOT", sl, "NODE", from.ID).Error(); err != nil {
							t.Fatal(err)
						}
					}
					if got := other.do("SET", k2, "10"); got != "+OK\r\n" {
						t.Fatalf("another client's SET of the second watched key after its slot's rollback: %q", got)
					}
					want = "*-1\r\n"
				}
				conn.send([]string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"})
				conn.read()
				conn.read()
				if got := conn.read(); got != want {
					t.Errorf("EXEC of INCR %s, watched with %s (%s): %q, want %q", k, k2, second, got, want)
				}
			})
		}
	}
}
