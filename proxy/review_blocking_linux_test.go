package proxy_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// With --timeout set, a client served on its own goroutine that went away
// during its BLPOP was never noticed: the watch for its hang-up waited on
// the socket under the read deadline its last read had set (the idle
// timeout), and ended, seeing nothing, once that passed, though a waiting
// client is not idle. The BLPOP then kept waiting at the node for no one,
// holding its connection and its place under --max-blocking, and popped
// the next element pushed.
func TestBlockedGoroutineClientHangsUpPastIdleTimeout(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	const idle = 150 * time.Millisecond
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: -1, IdleTimeout: idle})
	blocked := blpopWaiters(t, c, "idlebl")
	waiter := dialRaw(t, addr)
	waiter.send([]string{"BLPOP", "idlebl", "0"})
	waitUntil(t, "the BLPOP waits at the node", func() bool { return blocked() == 1 })
	// Past the deadline of the waiter's last read: a time to wait, not a
	// condition to poll.
	time.Sleep(2 * idle)
	waiter.c.Close()
	waitUntil(t, "no BLPOP waits at the node once its client left", func() bool { return blocked() == 0 })
	other := dialRaw(t, addr)
	other.do("RPUSH", "idlebl", "x")
	if got := other.do("LLEN", "idlebl"); got != ":1\r\n" {
		t.Errorf("LLEN after the waiter left: %q, want :1", got)
	}
}
