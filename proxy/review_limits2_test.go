package proxy_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A RESP3 subscriber may send ordinary commands; Redis counts their
// replies with its messages against the pubsub class's limit (32mb), so
// one that pipelines big reads and reads nothing is closed (measured on
// 7.0.15: 3000 GETs of a 1 MB value, closed at 32 MB). sluice counted
// only its messages, and took a subscriber out of the normal class's
// limit too: whatever --client-output-buffer-limit said, such a client
// stayed open while sluice held up to its 1024 commands' replies (1.2 GB
// of RSS, measured). Both serving paths.
func TestSubscriberRepliesCountAgainstThePubsubLimit(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	// Just past the pubsub class's 32mb, against a normal class's limit
	// far above it; encoded once, as each copy of it costs under -race.
	echo := router.AppendCommand(nil, [][]byte{[]byte("ECHO"), bytes.Repeat([]byte("x"), 32<<20+1<<10)})
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, OutputLimit: proxy.OutputLimit{Hard: 64 << 20}}, func(t *testing.T, cfg proxy.Config) {
		sub := dialRaw(t, serveConfig(t, cfg))
		sub.do("HELLO", "3")
		if got := sub.do("SUBSCRIBE", "limitsub"); got != ">3\r\n$9\r\nsubscribe\r\n$8\r\nlimitsub\r\n:1\r\n" {
			t.Fatalf("SUBSCRIBE: %q", got)
		}
		sub.c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := sub.c.Write(echo); err != nil {
			t.Fatal(err)
		}
		if b, err := sub.br.ReadByte(); err == nil {
			t.Errorf("a subscriber's reply past the pubsub limit was sent (%q...), want the client closed", b)
		}
	})
}
