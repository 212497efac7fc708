package proxy_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
)

// TestBlockingSubscriberIsWrittenWhileItWaits pipelines a blocking
// command behind subscription commands: Redis writes the replies before
// it as it blocks, and pushes the messages published during the wait at
// once. On a goroutine, a client that had subscribed got neither until
// the command was answered (a client waiting for its SUBSCRIBE's
// confirmation before pushing the element waited for good); on a loop,
// the messages waited behind the blocking command's reply.
func TestBlockingSubscriberIsWrittenWhileItWaits(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	blocked := regexp.MustCompile(`flags=[A-Za-z]*b`)
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		k := "{bsub" + strconv.Itoa(-loops) + "}"
		node := primaryOf(t, c, k)
		for _, tc := range []struct {
			name string
			cmds [][]string
			// resp3: the client subscribed in RESP3, and a message is
			// published during the wait
			resp3 bool
		}{
			{"RESP2, unsubscribed", [][]string{{"SUBSCRIBE", k}, {"UNSUBSCRIBE"}, {"BLPOP", k, "0"}}, false},
			{"RESP3, subscribed", [][]string{{"PING"}, {"SUBSCRIBE", k}, {"BLPOP", k, "0"}}, true},
		} {
			// replies are what at sends, each read before the next step.
			replies := func(at string) []string {
				conn := dialRaw(t, at)
				if tc.resp3 {
					conn.do("HELLO", "3")
				}
				conn.send(tc.cmds...)
				waitUntil(t, "the command waits at the node", func() bool {
					l, err := node.Do(ctx, "CLIENT", "LIST").ToString()
					return err == nil && blocked.MatchString(l)
				})
				var got []string
				read := func() {
					conn.c.SetReadDeadline(time.Now().Add(time.Second))
					b, err := reply.Read(conn.br, nil)
					if err != nil {
						got = append(got, err.Error())
						return
					}
					got = append(got, string(b))
				}
				for range len(tc.cmds) - 1 {
					read()
				}
				other := dialRaw(t, at)
				if tc.resp3 {
					other.do("PUBLISH", k, "m")
					read()
				}
				other.do("RPUSH", k, "v")
				read()
				return got
			}
			want := replies(node.Addr)
			got := replies(addr)
			for i := range want {
				if i >= len(got) || got[i] != want[i] {
					t.Errorf("loops %d, %s: %q\n got %q\nwant %q", loops, tc.name, tc.cmds, got, want)
					break
				}
			}
		}
	}
}
