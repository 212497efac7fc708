package proxy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A RESP3 subscriber's SPUBLISH (PUBLISH) of its own channel pipelined
// before a RESET pushes it its message before RESET's reply, as Redis
// does: the RESET must not end the subscription before the node has sent
// the message. Both serving paths.
func TestPassthroughPublishBeforeResetIsDelivered(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		lost := 0
		for i := range 50 {
			for _, kind := range []struct{ sub, pub, message string }{
				{"SUBSCRIBE", "PUBLISH", "message"},
				{"SSUBSCRIBE", "SPUBLISH", "smessage"},
			} {
				ch := fmt.Sprintf("{pr%d%s}%d", cfg.Loops, kind.sub, i)
				conn := dialRaw(t, addr)
				conn.do("HELLO", "3")
				if got := conn.do(kind.sub, ch); !strings.HasPrefix(got, ">3\r\n") {
					t.Fatalf("%s %s: %q", kind.sub, ch, got)
				}
				conn.send([]string{kind.pub, ch, "hi"}, []string{"RESET"})
				message := fmt.Sprintf(">3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nhi\r\n", len(kind.message), kind.message, len(ch), ch)
				var got []string
				for len(got) == 0 || got[len(got)-1] != "+RESET\r\n" {
					got = append(got, conn.read())
				}
				if len(got) != 3 || !strings.Contains(strings.Join(got, ""), message) {
					lost++
					t.Logf("%s then %s %s, RESET: replies %q, want the message %q among them", kind.sub, kind.pub, ch, got, message)
				}
				conn.c.Close()
			}
		}
		if lost > 0 {
			t.Errorf("%d messages of 100 lost", lost)
		}
	})
}

// So is one pipelined before a QUIT: Redis pushes the message, then
// answers QUIT. (On the loops the client was closed before its message
// came; on a goroutine it came after QUIT's +OK.) Both serving paths.
func TestPassthroughPublishBeforeQuitIsDelivered(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		lost := 0
		for i := range 50 {
			for _, kind := range []struct{ sub, pub, message string }{
				{"SUBSCRIBE", "PUBLISH", "message"},
				{"SSUBSCRIBE", "SPUBLISH", "smessage"},
			} {
				ch := fmt.Sprintf("{pq%d%s}%d", cfg.Loops, kind.sub, i)
				conn := dialRaw(t, addr)
				conn.do("HELLO", "3")
				if got := conn.do(kind.sub, ch); !strings.HasPrefix(got, ">3\r\n") {
					t.Fatalf("%s %s: %q", kind.sub, ch, got)
				}
				conn.send([]string{kind.pub, ch, "hi"}, []string{"PING"}, []string{"QUIT"})
				message := fmt.Sprintf(">3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nhi\r\n", len(kind.message), kind.message, len(ch), ch)
				got := conn.endAndReadAll()
				if !strings.HasSuffix(got, "+OK\r\n") || !strings.Contains(got, message) || strings.Count(got, "+OK\r\n") != 1 {
					lost++
					t.Logf("%s then %s %s, PING, QUIT: replies %q, want the message %q before +OK", kind.sub, kind.pub, ch, got, message)
				}
			}
		}
		if lost > 0 {
			t.Errorf("%d messages of 100 lost or after QUIT's reply", lost)
		}
	})
}
