package proxy_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A transaction whose slot is being migrated, one of its keys still on
// the source (queued there) and another already gone (ASK), has its keys
// split between the two nodes: sluice answers TRYAGAIN, as Redis Cluster
// does for such keys, without following the ASK. Followed, the whole
// block went to the target, and when a MIGRATE moved the source's key in
// between (a reviewer's live resharding, in every fast run), the block ran
// there after a command the client had pipelined behind it had already
// run on the source: `MULTI, INCR k1, INCR k2, EXEC, INCR k1` answered
// EXEC with k1 at 120 and the INCR after it 119.
func TestTransactionSplitByAMigrationIsNotFollowed(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		tag := "{txsplit" + strconv.Itoa(-loops) + "}"
		k1, k2 := tag+"k1", tag+"k2"
		sl := slot.Of(tag)
		from, err := c.Primary(ctx, sl)
		if err != nil {
			t.Fatal(err)
		}
		to := otherPrimary(c, from)
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		if got := conn.do("SET", k1, "0"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		if _, err := c.StartMove(ctx, sl, to); err != nil {
			t.Fatal(err)
		}
		asked := cmdStat(t, to, "asking", "calls")
		conn.send([]string{"MULTI"}, []string{"INCR", k1}, []string{"INCR", k2}, []string{"EXEC"}, []string{"INCR", k1})
		for i, want := range []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "-TRYAGAIN Multiple keys request during rehashing of slot\r\n", ":1\r\n"} {
			if got := conn.read(); got != want {
				t.Errorf("loops %d, reply %d: %q, want %q", loops, i, got, want)
			}
		}
		if n := cmdStat(t, to, "asking", "calls") - asked; n != 0 {
			t.Errorf("loops %d: the transaction was sent to the importing node (%d ASKING)", loops, n)
		}
		if err := c.MoveSlot(ctx, sl, to); err != nil {
			t.Fatalf("loops %d: completing the migration: %v", loops, err)
		}
	}
}
