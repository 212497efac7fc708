package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// A client that unsubscribed from everything is of the normal class
// again: one that then reads none of its replies is closed by the soft
// output limit, or by --timeout (a write that makes no progress is no
// interaction), as one that never subscribed is, and as Redis closes it.
// On a goroutine its replies still went through its tunnel's writer,
// past both bounds: it was never closed. (Run by
// TestIdleTimeoutClosesAClientThatUnsubscribedAll, on its cluster; a
// loop bounds it already, by its sweep, a second at a time.)
func unsubscribedNotReadingIsClosed(t *testing.T, r *router.Cluster) {
	for name, cfg := range map[string]proxy.Config{
		"soft":    {Decider: r, Forwarder: r, Loops: -1, OutputLimit: proxy.OutputLimit{Soft: 32 << 10, SoftFor: 200 * time.Millisecond}},
		"timeout": {Decider: r, Forwarder: r, Loops: -1, IdleTimeout: 300 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			addr := serveConfig(t, cfg)
			conn := dialRaw(t, addr)
			if got := conn.do("SUBSCRIBE", "ur:"+name); !strings.HasPrefix(got, "*3\r\n$9\r\nsubscribe\r\n") {
				t.Fatalf("SUBSCRIBE: %q", got)
			}
			if got := conn.do("UNSUBSCRIBE"); !strings.HasPrefix(got, "*3\r\n$11\r\nunsubscribe\r\n") || !strings.HasSuffix(got, ":0\r\n") {
				t.Fatalf("UNSUBSCRIBE: %q", got)
			}
			floodUnread(t, conn, addr)
		})
	}
}
