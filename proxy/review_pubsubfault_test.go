package proxy_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A RESP2 subscriber that pipelines an SSUBSCRIBE of a shard channel
// whose slot has just moved (sluice's slot map not read again yet) and an
// SUNSUBSCRIBE of all its shard channels: the SSUBSCRIBE meets the old
// owner's MOVED and goes on to the new one, where the SUNSUBSCRIBE, sent
// at once, must not overtake it. One node runs them in the order sent:
// the channel is subscribed (2 in all), then both are left, and no
// subscription remains. Both serving paths.
func TestPassthroughShardSubscribeRedirectedBeforeAPipelinedUnsubscribe(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ctx := context.Background()
	bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	conf := func(kind, ch string, n int) string {
		return "*3\r\n" + bulk(kind) + bulk(ch) + ":" + strconv.Itoa(n) + "\r\n"
	}
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		// The slot map is read only when a MOVED says it is stale.
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1,
			TopologyInterval: time.Hour})
		waitRouter(t, r)
		cfg.Decider, cfg.Forwarder = r, r
		var a, b string
		var na, nb *clustertest.Node
		for i := 0; nb == nil && i < 1000; i++ {
			ch := "{mvpipe" + t.Name() + strconv.Itoa(i) + "}"
			switch n := primaryOf(t, c, ch); {
			case na == nil:
				a, na = ch, n
			case n != na:
				b, nb = ch, n
			}
		}
		sub := dialRaw(t, serveConfig(t, cfg))
		if got, want := sub.do("SSUBSCRIBE", a), conf("ssubscribe", a, 1); got != want {
			t.Fatalf("SSUBSCRIBE a: %q, want %q", got, want)
		}
		if got, want := sub.do("SSUBSCRIBE", b), conf("ssubscribe", b, 2); got != want {
			t.Fatalf("SSUBSCRIBE b: %q, want %q", got, want)
		}
		if err := c.MoveSlot(ctx, slot.Of(a), nb); err != nil {
			t.Fatal(err)
		}
		if got, want := sub.read(), conf("sunsubscribe", a, 1); got != want {
			t.Fatalf("a's slot moved: %q, want %q", got, want)
		}
		sub.send([]string{"SSUBSCRIBE", a}, []string{"SUNSUBSCRIBE"}, []string{"PING"})
		if got, want := sub.read(), conf("ssubscribe", a, 2); got != want {
			t.Errorf("SSUBSCRIBE a at its new owner: %q, want %q", got, want)
		}
		u1, u2 := sub.read(), sub.read()
		if !(u1 == conf("sunsubscribe", a, 1) && u2 == conf("sunsubscribe", b, 0) ||
			u1 == conf("sunsubscribe", b, 1) && u2 == conf("sunsubscribe", a, 0)) {
			t.Errorf("SUNSUBSCRIBE: %q then %q, want a and b left, 1 then 0", u1, u2)
		}
		if got := sub.read(); got != "+PONG\r\n" {
			t.Errorf("PING with no subscription left: %q, want +PONG", got)
		}
	})
}
