package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A node frees a client once QUIT's +OK (or a protocol error) is
// written, its subscriptions with it: a SPUBLISH after that reaches no
// one. Sluice kept the subscriber's node connections while the client
// lingered (up to lingerTime, 1 s, when the client does not close its
// side at once), so the nodes still counted it and sent it messages.
// Both serving paths, channels and shard channels.
func TestPassthroughQuitEndsSubscriptionsAtOnce(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		pub := dialRaw(t, addr)
		for _, kind := range []struct{ sub, numsub, end, reply string }{
			{"SUBSCRIBE", "NUMSUB", "QUIT\r\n", "+OK\r\n"},
			{"SSUBSCRIBE", "SHARDNUMSUB", "QUIT\r\n", "+OK\r\n"},
			{"SUBSCRIBE", "NUMSUB", "*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
			{"SSUBSCRIBE", "SHARDNUMSUB", "*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		} {
			ch := "quitsub:" + t.Name() + kind.sub + kind.end[:1]
			sub := dialRaw(t, addr)
			if got := sub.do(kind.sub, ch); !strings.HasSuffix(got, ":1\r\n") {
				t.Fatalf("%s: %q", kind.sub, got)
			}
			if _, err := sub.c.Write([]byte(kind.end)); err != nil {
				t.Fatal(err)
			}
			if got := sub.read(); got != kind.reply {
				t.Fatalf("%q: %q, want %q", kind.end, got, kind.reply)
			}
			// Well under lingerTime: the client keeps its side open.
			deadline := time.Now().Add(600 * time.Millisecond)
			for got := ""; got != ":0\r\n"; {
				if time.Now().After(deadline) {
					t.Fatalf("PUBSUB %s %s after %q: %q, want 0: the nodes still serve the gone subscriber", kind.numsub, ch, kind.end, got)
				}
				s := pub.do("PUBSUB", kind.numsub, ch)
				got = s[strings.LastIndexByte(s[:len(s)-2], '\n')+1:]
			}
		}
	})
}
