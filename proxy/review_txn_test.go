package proxy_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
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

// pinMover moves a slot to another primary once, after sluice pins a
// connection for a client's first WATCH and before that WATCH is routed:
// the slot map sluice routes by changes in between, as a resharding or a
// failover may make it.
type pinMover struct {
	*router.Cluster
	move atomic.Pointer[func()]
}

func (p *pinMover) Pin(sl int, resp3 bool) *router.Pin {
	pin := p.Cluster.Pin(sl, resp3)
	if move := p.move.Swap(nil); move != nil {
		(*move)()
	}
	return pin
}

// A first WATCH whose slot moved between the pinning and the routing
// watches its keys where they are now: it answered CROSSSLOT for one key,
// and the pin, never dialled, answered null to an EXEC on its old node.
func TestReviewTxnFirstWatchAfterAMove(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	// Reading the slot map often, it sees the move soon.
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1, TopologyInterval: 10 * time.Millisecond})
	waitRouter(t, r)
	for _, loops := range []int{0, -1} {
		k := fmt.Sprintf("{pm%d}k", loops)
		from := primaryOf(t, c, k)
		to := otherPrimary(c, from)
		// A key that stays on the old node.
		j := keyWhere(t, c, "pmj", "j", func(n *clustertest.Node, key string) bool { return n == from && slot.Of(key) != slot.Of(k) })
		fw := &pinMover{Cluster: r}
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: fw, Loops: loops}))
		other := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		// On sluice's goroutine: t.Error, not t.Fatal.
		move := func() {
			if err := c.MoveSlot(context.Background(), slot.Of(k), to); err != nil {
				t.Error(err)
				return
			}
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				fs := []router.Forward{{Slot: slot.Of(k)}}
				if r.Route(fs); fs[0].Addr == to.Addr {
					return
				}
			}
			t.Error("the router did not read the moved slot")
		}
		fw.move.Store(&move)
		steps := [][]string{
			{"WATCH", k}, {"MULTI"}, {"SET", j, "1"}, {"EXEC"},
			{"WATCH", k}, {"MULTI"}, {"SET", k, "1"}, {"EXEC"},
		}
		want := []string{
			"+OK\r\n", "+OK\r\n", "+QUEUED\r\n", "*1\r\n+OK\r\n",
			"+OK\r\n", "+OK\r\n", "+QUEUED\r\n", "*1\r\n+OK\r\n",
		}
		for i, args := range steps {
			if got := conn.do(args...); got != want[i] {
				t.Errorf("loops %d: %q: %q, want %q", loops, args, got, want[i])
			}
		}
		// The watch is on the key's new node: a change of the key
		// aborts the transaction.
		conn.do("WATCH", k)
		other.do("SET", k, "2")
		conn.send([]string{"MULTI"}, []string{"SET", k, "3"}, []string{"EXEC"})
		for i, want := range []string{"+OK\r\n", "+QUEUED\r\n", "*-1\r\n"} {
			if got := conn.read(); got != want {
				t.Errorf("loops %d: watched key changed, reply %d: %q, want %q", loops, i, got, want)
			}
		}
	}
}
