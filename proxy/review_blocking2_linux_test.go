package proxy_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// TestBlockingResetClientPopsNothing resets a client (RST) right after its
// BLPOP, then pushes an element. Redis ran the BLPOP before the push, found
// the list empty and freed the client with its connection: the element
// stays. Through sluice the BLPOP, not yet on its node connection when the
// reset was seen (dialing), was run anyway without waiting, after the
// push: it popped the element for no one. Seen as most elements lost when
// a client resets just after a BLPOP, on both serving paths. The node of
// the BLPOP is paused so that its connection's handshake (HELLO 3) holds
// the command back until the reset is seen. On the goroutine path the
// reset is seen by the hang-up watch, once a command before the BLPOP (on
// another paused node) is answered and its reply written to the reset
// socket.
func TestBlockingResetClientPopsNothing(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ctx := context.Background()
	k := "{rstbl}l"
	node := primaryOf(t, c, k)
	other := ""
	for i := 0; other == ""; i++ {
		if o := "{rstbl" + strconv.Itoa(i) + "}o"; primaryOf(t, c, o).Addr != node.Addr {
			other = o
		}
	}
	otherNode := primaryOf(t, c, other)
	port := func(n *clustertest.Node) int {
		_, p, _ := net.SplitHostPort(n.Addr)
		i, _ := strconv.Atoi(p)
		return i
	}
	cmdLen := func(args ...string) int {
		bs := make([][]byte, len(args))
		for i, a := range args {
			bs[i] = []byte(a)
		}
		return len(router.AppendCommand(nil, bs))
	}
	hello3 := cmdLen("HELLO", "3")
	for _, loops := range []int{0, -1} {
		// Each its own: no idle blocking connection, which would spare
		// the BLPOP the handshake.
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1, MaxBlocking: 1})
		waitRouter(t, r)
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		node.Do(ctx, "DEL", k)
		conn := dialRaw(t, addr)
		conn.do("HELLO", "3") // its blocking connection's handshake
		if err := node.Pause(); err != nil {
			t.Fatal(err)
		}
		if loops == 0 {
			conn.send([]string{"BLPOP", k, "0"})
		} else {
			if err := otherNode.Pause(); err != nil {
				t.Fatal(err)
			}
			conn.send([]string{"GET", other}, []string{"BLPOP", k, "0"})
			// Read, the GET on its way: on a connection of its protocol,
			// new or not.
			waitUntil(t, "the GET is at its node", func() bool {
				return nodeHolds(t, port(otherNode), "01", cmdLen("GET", other)) || nodeHolds(t, port(otherNode), "01", hello3)
			})
		}
		conn.c.(*net.TCPConn).SetLinger(0)
		conn.c.Close()
		if loops == 0 {
			observer := dialRaw(t, addr)
			waitUntil(t, "sluice closes the reset client", func() bool {
				return strings.Contains(observer.do("INFO", "clients"), "connected_clients:1\r\n")
			})
		}
		pusher := dialRaw(t, node.Addr)
		pusher.send([]string{"RPUSH", k, "x"})
		if loops != 0 {
			waitUntil(t, "the push is at the node", func() bool {
				return nodeHolds(t, port(node), "01", cmdLen("RPUSH", k, "x"))
			})
			if err := otherNode.Resume(); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "the BLPOP's connection is in its handshake", func() bool {
			return nodeHolds(t, port(node), "01", hello3)
		})
		if err := node.Resume(); err != nil {
			t.Fatal(err)
		}
		// The only place under --max-blocking is free once the BLPOP is
		// done with.
		observer := dialRaw(t, addr)
		waitUntil(t, "the BLPOP ends", func() bool {
			return observer.do("BLPOP", other, "0.01") == "*-1\r\n"
		})
		if n, _ := node.Do(ctx, "LLEN", k).AsInt64(); n != 1 {
			t.Errorf("loops %d: LLEN after the push that followed the reset: %d, want 1", loops, n)
		}
	}
}
