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
// the message. So is one pipelined before a QUIT: Redis pushes the
// message, then answers QUIT. (On the loops the client was closed before
// its message came; on a goroutine it came after QUIT's +OK.) Both
// serving paths.
func TestPassthroughPublishBeforeResetOrQuitIsDelivered(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, end := range []struct {
		name, tag string
		tail      [][]string
		// replies reads what follows the PUBLISH, and whether it is what
		// Redis answers, given the message as Redis pushes it.
		replies func(conn *rawConn, message string) (string, bool)
	}{
		{"RESET", "pr", [][]string{{"RESET"}}, func(conn *rawConn, message string) (string, bool) {
			var got []string
			for len(got) == 0 || got[len(got)-1] != "+RESET\r\n" {
				got = append(got, conn.read())
			}
			conn.c.Close()
			all := strings.Join(got, "")
			return all, len(got) == 3 && strings.Contains(all, message)
		}},
		{"QUIT", "pq", [][]string{{"PING"}, {"QUIT"}}, func(conn *rawConn, message string) (string, bool) {
			got := conn.endAndReadAll()
			return got, strings.HasSuffix(got, "+OK\r\n") && strings.Contains(got, message) && strings.Count(got, "+OK\r\n") == 1
		}},
	} {
		t.Run(end.name, func(t *testing.T) {
			eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
				addr := serveConfig(t, cfg)
				lost := 0
				for i := range 50 {
					for _, kind := range []struct{ sub, pub, message string }{
						{"SUBSCRIBE", "PUBLISH", "message"},
						{"SSUBSCRIBE", "SPUBLISH", "smessage"},
					} {
						ch := fmt.Sprintf("{%s%d%s}%d", end.tag, cfg.Loops, kind.sub, i)
						conn := dialRaw(t, addr)
						conn.do("HELLO", "3")
						if got := conn.do(kind.sub, ch); !strings.HasPrefix(got, ">3\r\n") {
							t.Fatalf("%s %s: %q", kind.sub, ch, got)
						}
						conn.send(append([][]string{{kind.pub, ch, "hi"}}, end.tail...)...)
						message := fmt.Sprintf(">3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nhi\r\n", len(kind.message), kind.message, len(ch), ch)
						if got, ok := end.replies(conn, message); !ok {
							lost++
							t.Logf("%s then %s %s, %v: replies %q, want the message %q before %s's reply", kind.sub, kind.pub, ch, end.tail, got, message, end.name)
						}
					}
				}
				if lost > 0 {
					t.Errorf("%d messages of 100 lost or after %s's reply", lost, end.name)
				}
			})
		})
	}
}
