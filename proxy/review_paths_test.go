package proxy_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A RESP3 subscriber's PUBLISH (SPUBLISH) of its own channel pipelined
// before a protocol error is pushed its message before the error, as
// Redis pushes it before PUBLISH's reply. The loops wrote the error and
// closed the client before the message came from the node, which was
// lost or came after the error; a goroutine lost it now and then
// (TestPathsAnswerAlike, PATHS_PUBSUB=1 PATHS_PUBLISH=1, seeds 164, 535,
// 840, 1627, 2168). Both serving paths.
func TestPassthroughPublishBeforeProtocolErrorIsDelivered(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		lost := 0
		for i := range 25 {
			// A framing error, or an inline line's unbalanced quotes.
			bad, errLine := "*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n"
			if i%2 == 1 {
				bad, errLine = "ECHO \"a\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"
			}
			for _, kind := range []struct{ sub, pub, message string }{
				{"SUBSCRIBE", "PUBLISH", "message"},
				{"SSUBSCRIBE", "SPUBLISH", "smessage"},
			} {
				ch := fmt.Sprintf("{ppe%d%s}%d", cfg.Loops, kind.sub, i)
				conn := dialRaw(t, addr)
				conn.do("HELLO", "3")
				if got := conn.do(kind.sub, ch); !strings.HasPrefix(got, ">3\r\n") {
					t.Fatalf("%s %s: %q", kind.sub, ch, got)
				}
				conn.send([]string{kind.pub, ch, "hi"})
				if _, err := conn.c.Write([]byte(bad)); err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(conn.br)
				if err != nil {
					t.Fatal(err)
				}
				got := string(b)
				message := fmt.Sprintf(">3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nhi\r\n", len(kind.message), kind.message, len(ch), ch)
				// After PUBLISH's reply, as at a client's EOF (the message
				// comes from another connection than the reply).
				if !strings.HasSuffix(got, message+errLine) {
					lost++
					t.Logf("%s then %s %s and a protocol error: replies %q, want the message %q before the error", kind.sub, kind.pub, ch, got, message)
				}
			}
		}
		if lost > 0 {
			t.Errorf("%d messages of 50 lost or after the error", lost)
		}
	})
}
