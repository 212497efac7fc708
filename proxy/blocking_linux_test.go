package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
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
