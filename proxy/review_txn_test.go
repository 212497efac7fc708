package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// SWAPDB inside MULTI is queued, as a cluster node queues it, and refused
// as an element of EXEC's array while the transaction's other commands
// run: it does not abort the transaction.
func TestReviewTxnSwapDBQueued(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	txns := [][][]string{
		{{"MULTI"}, {"SET", "{sw}x", "1"}, {"SWAPDB", "0", "1"}, {"GET", "{sw}x"}, {"EXEC"}},
		{{"MULTI"}, {"SWAPDB", "0", "1"}, {"EXEC"}},
	}
	addrs := map[int]string{}
	for _, loops := range []int{0, -1} {
		addrs[loops] = serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
	}
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		n, err := c.Primary(t.Context(), slot.Of("{sw}x"))
		if err != nil {
			t.Fatal(err)
		}
		via, node := dialRaw(t, addrs[loops]), dialRaw(t, n.Addr)
		if resp3 {
			via.do("HELLO", "3")
			node.do("HELLO", "3")
		}
		for _, txn := range txns {
			for _, args := range txn {
				if got, want := via.do(args...), node.do(args...); got != want {
					t.Errorf("%q: %q, want the node's %q", args, got, want)
				}
			}
		}
	})
}
