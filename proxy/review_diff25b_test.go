package proxy_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A RESP3 subscriber blocked in BLPOP whose tunnel fails is closed, as a client
// of a node that went away; its BLPOP must end with it at the node, as
// Redis frees a blocked client that goes away: an element pushed later is
// not popped for a client that no longer is.
func TestReviewTunnelEndsDuringABlock(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	blocked := regexp.MustCompile(`flags=[A-Za-z]*b`)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		k := "{review-diff25b-" + strconv.Itoa(cfg.Loops) + "}"
		node := primaryOf(t, c, k)
		sub := dialRaw(t, addr)
		sub.do("HELLO", "3")
		sub.do("SUBSCRIBE", "ch")
		sub.send([]string{"BLPOP", k, "0"})
		waitUntil(t, "the command waits at the node", func() bool {
			l, err := node.Do(ctx, "CLIENT", "LIST").ToString()
			return err == nil && blocked.MatchString(l)
		})
		for _, n := range c.Nodes {
			n.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub")
		}
		sub.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if b, err := sub.br.ReadBytes(0); err == nil || len(b) > 0 && !regexp.MustCompile(`^-ERR`).Match(b) {
			t.Fatalf("after its tunnel failed: %q, %v; want closed", b, err)
		}
		waitUntil(t, "the BLPOP ends at the node", func() bool {
			l, err := node.Do(ctx, "CLIENT", "LIST").ToString()
			return err == nil && !blocked.MatchString(l)
		})
		other := dialRaw(t, addr)
		other.do("RPUSH", k, "v")
		if got := other.do("LLEN", k); got != ":1\r\n" {
			t.Errorf("LLEN after an RPUSH: %q, the element popped for a client closed", got)
		}
	})
}
