package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A subscriber whose SSUBSCRIBE or SUBSCRIBE needs a connection to a node
// that cannot be reached (down, its slots not yet failed over) gets the
// error for that command and keeps its other subscriptions, as a cluster
// client keeps its connections to the other nodes: it is not closed, and
// what it subscribed to on healthy nodes still reaches it. Both serving
// paths, RESP2 and RESP3.
func TestSubscribeToADeadNodeKeepsTheClient(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	r := newForwarding(t, c)
	victim := primaryOf(t, c, "{dead}")
	// A name of a slot on a live node, and one on the victim, for each
	// kind of channel.
	name := func(t *testing.T, prefix string, dead bool) string {
		for i := 0; ; i++ {
			ch := fmt.Sprintf("%s%d", prefix, i)
			n, err := c.Primary(context.Background(), slot.Of(ch))
			if err != nil {
				t.Fatal(err)
			}
			if (n == victim) == dead {
				return ch
			}
		}
	}
	liveKey, deadShard, deadPlain := name(t, "lk", false), name(t, "ds", true), name(t, "dp", true)
	victim.Kill()
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		pub := dialRaw(t, addr)
		for _, resp3 := range []bool{false, true} {
			t.Run(fmt.Sprint("resp3=", resp3), func(t *testing.T) {
				// Channels of this subtest's own: the subscriber of the one
				// before is closed, but its node may not have seen it go
				// yet, and would count it among the receivers.
				liveShard, livePlain := name(t, "ls:"+t.Name(), false), name(t, "lp:"+t.Name(), false)
				sub := dialRaw(t, addr)
				arr, pong := "*", "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
				if resp3 {
					sub.do("HELLO", "3")
					arr, pong = ">", "+PONG\r\n"
				}
				want := func(cmd []string, reply string) {
					t.Helper()
					if got := sub.do(cmd...); !strings.HasPrefix(got, reply) {
						t.Fatalf("%q: %q, want %q...", cmd, got, reply)
					}
				}
				want([]string{"SSUBSCRIBE", liveShard}, fmt.Sprintf("%s3\r\n$10\r\nssubscribe\r\n$%d\r\n%s\r\n:1\r\n", arr, len(liveShard), liveShard))
				want([]string{"SSUBSCRIBE", deadShard}, "-ERR sluice: connection to "+victim.Addr)
				want([]string{"SUBSCRIBE", deadPlain}, "-ERR sluice: connection to "+victim.Addr)
				want([]string{"SUBSCRIBE", livePlain}, fmt.Sprintf("%s3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n", arr, len(livePlain), livePlain))
				want([]string{"PING"}, pong)
				if got := pub.do("SPUBLISH", liveShard, "m1"); got != ":1\r\n" {
					t.Fatalf("SPUBLISH: %q", got)
				}
				if got, want := sub.read(), fmt.Sprintf("%s3\r\n$8\r\nsmessage\r\n", arr); !strings.HasPrefix(got, want) {
					t.Fatalf("the shard channel's message: %q, want %q...", got, want)
				}
				if got := pub.do("PUBLISH", livePlain, "m2"); got != ":1\r\n" {
					t.Fatalf("PUBLISH: %q", got)
				}
				if got, want := sub.read(), fmt.Sprintf("%s3\r\n$7\r\nmessage\r\n", arr); !strings.HasPrefix(got, want) {
					t.Fatalf("the channel's message: %q, want %q...", got, want)
				}
			})
		}
		// A client whose first subscription fails is not subscribed: what
		// it pipelined after it is answered as any client's.
		first := dialRaw(t, addr)
		first.send([]string{"SSUBSCRIBE", deadShard}, []string{"PING"}, []string{"GET", liveKey})
		for i, want := range []string{"-ERR sluice: connection to " + victim.Addr, "+PONG\r\n", "$-1\r\n"} {
			if got := first.read(); !strings.HasPrefix(got, want) {
				t.Fatalf("reply %d after a first SSUBSCRIBE that failed: %q, want %q...", i, got, want)
			}
		}
	})
}
