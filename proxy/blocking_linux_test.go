package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// TestPassthroughBlockingOnAConnectionTheNodeClosed closes, at the node,
// the idle connection sluice keeps for blocking commands (as the node's
// timeout, a restart or CLIENT KILL does): the next blocking command must
// run on a sound one, not answer the closed one's error.
func TestPassthroughBlockingOnAConnectionTheNodeClosed(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		k := "{idleblock}l" + strconv.Itoa(-loops)
		node := primaryOf(t, c, k)
		if got := conn.do("BLPOP", k, "0.01"); got != "*-1\r\n" {
			t.Fatalf("loops %d: BLPOP of an empty list: %q", loops, got)
		}
		list, err := node.Do(ctx, "CLIENT", "LIST").ToString()
		if err != nil {
			t.Fatal(err)
		}
		killed := 0
		for _, id := range clientIDs(list, "blpop") {
			if err := node.Do(ctx, "CLIENT", "KILL", "ID", id).Error(); err != nil {
				t.Fatal(err)
			}
			killed++
		}
		if killed == 0 {
			t.Fatalf("loops %d: no connection on %s ran the BLPOP:\n%s", loops, node.Addr, list)
		}
		waitUntil(t, "the node closes the connection", func() bool {
			l, _ := node.Do(ctx, "CLIENT", "LIST").ToString()
			return !strings.Contains(l, "cmd=blpop")
		})
		if got := conn.do("RPUSH", k, "x"); got != ":1\r\n" {
			t.Fatalf("loops %d: RPUSH: %q", loops, got)
		}
		if got := conn.do("BLPOP", k, "1"); got != "*2\r\n$"+strconv.Itoa(len(k))+"\r\n"+k+"\r\n$1\r\nx\r\n" {
			t.Errorf("loops %d: BLPOP after the node closed the idle connection: %q", loops, got)
		}
	}
}

// TestPassthroughBlockingSlotFreedBeforeTheReply runs blocking commands
// one after the other, each answered at once, under --max-blocking 1:
// each one's place must be free once its client has its reply, so the
// next is never refused. Its place was let go only after the reply was
// handed back, and a client quick to send the next one met the bound.
func TestPassthroughBlockingSlotFreedBeforeTheReply(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1, MaxBlocking: 1})
	waitRouter(t, r)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		k := "{slotfreed}" + t.Name()
		const n = 500
		args := []string{"RPUSH", k}
		for range n {
			args = append(args, "x")
		}
		conn.do(args...)
		cmds := make([][]string, n)
		for i := range cmds {
			cmds[i] = []string{"BLPOP", k, "0"}
		}
		conn.send(cmds...)
		for i := range n {
			if got := conn.read(); strings.Contains(got, "max-blocking") {
				t.Fatalf("BLPOP %d, the one before it answered: %q", i, got)
			}
		}
	})
}
