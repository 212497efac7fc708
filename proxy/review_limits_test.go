package proxy_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A client that unsubscribed from everything is no longer a subscriber:
// --timeout closes it once idle, as Redis clears its pub/sub flag then and
// closes it (measured on 7.0 with timeout 1: closed; one still subscribed
// stays open). sluice kept it open for good, its tunnel still there. Both
// protocols, both serving paths.
func TestIdleTimeoutClosesAClientThatUnsubscribedAll(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	t.Run("OutputLimit", func(t *testing.T) { outputLimitBoundsAClientThatUnsubscribedAll(t, r) })
	t.Run("NotReading", func(t *testing.T) { unsubscribedNotReadingIsClosed(t, r) })
	eachClockLoops(t, func(t *testing.T, loops int) {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops, IdleTimeout: 200 * time.Millisecond})
		sub := dialRaw(t, addr)
		if got := sub.do("SUBSCRIBE", "idlesub"); got != "*3\r\n$9\r\nsubscribe\r\n$7\r\nidlesub\r\n:1\r\n" {
			t.Fatalf("SUBSCRIBE: %q", got)
		}
		left := dialRaw(t, addr)
		if got := left.do("SUBSCRIBE", "idleleft"); got != "*3\r\n$9\r\nsubscribe\r\n$8\r\nidleleft\r\n:1\r\n" {
			t.Fatalf("SUBSCRIBE: %q", got)
		}
		if got := left.do("UNSUBSCRIBE"); got != "*3\r\n$11\r\nunsubscribe\r\n$8\r\nidleleft\r\n:0\r\n" {
			t.Fatalf("UNSUBSCRIBE: %q", got)
		}
		left3 := dialRaw(t, addr)
		left3.do("HELLO", "3")
		if got := left3.do("SUBSCRIBE", "idleleft3"); got != ">3\r\n$9\r\nsubscribe\r\n$9\r\nidleleft3\r\n:1\r\n" {
			t.Fatalf("RESP3 SUBSCRIBE: %q", got)
		}
		if got := left3.do("UNSUBSCRIBE", "idleleft3"); got != ">3\r\n$11\r\nunsubscribe\r\n$9\r\nidleleft3\r\n:0\r\n" {
			t.Fatalf("RESP3 UNSUBSCRIBE: %q", got)
		}
		for name, rc := range map[string]*rawConn{"RESP2": left, "RESP3": left3} {
			// The sweep looks once a second on a loop.
			rc.c.SetReadDeadline(time.Now().Add(4 * time.Second))
			if _, err := rc.br.ReadByte(); err == nil {
				t.Errorf("%s: sent something, want the close", name)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Errorf("%s: a client that unsubscribed from everything was not closed past --timeout", name)
			}
		}
		if got := sub.do("PING"); got != "*2\r\n$4\r\npong\r\n$0\r\n\r\n" {
			t.Errorf("the subscriber, still subscribed: PING: %q", got)
		}
	})
}

// Likewise (run by TestIdleTimeoutClosesAClientThatUnsubscribedAll, on its
// cluster), a client that unsubscribed from everything is of the normal
// class again: a reply past --client-output-buffer-limit's hard limit
// closes it, as Redis closes it (7.0, normal 64kb: closed, flags=N).
func outputLimitBoundsAClientThatUnsubscribedAll(t *testing.T, r *router.Cluster) {
	big := strings.Repeat("x", 100<<10)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, OutputLimit: proxy.OutputLimit{Hard: 64 << 10}}, func(t *testing.T, cfg proxy.Config) {
		left := dialRaw(t, serveConfig(t, cfg))
		if got := left.do("SUBSCRIBE", "limitleft"); got != "*3\r\n$9\r\nsubscribe\r\n$9\r\nlimitleft\r\n:1\r\n" {
			t.Fatalf("SUBSCRIBE: %q", got)
		}
		if got := left.do("UNSUBSCRIBE"); got != "*3\r\n$11\r\nunsubscribe\r\n$9\r\nlimitleft\r\n:0\r\n" {
			t.Fatalf("UNSUBSCRIBE: %q", got)
		}
		left.send([]string{"ECHO", big})
		if b, err := left.br.ReadByte(); err == nil {
			t.Errorf("a reply past the hard limit was sent (%q...), want the client closed", b)
		}
	})
}
