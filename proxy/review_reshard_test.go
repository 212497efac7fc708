package proxy_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
	"github.com/sluice-rl/sluice/router/slot"
)

// A subscriber's channels live on one node, which PUBLISH reaches over the
// cluster's bus. When that node leaves the cluster but keeps running (a
// failover demoted it, then redis-cli --cluster del-node forgot and reset
// it), the bus no longer brings it the cluster's messages: a subscriber
// kept on it would wait for them for ever. sluice ends such a subscriber,
// as a client of a node that went away is ended, so that it subscribes
// again; it must never stay deaf.
func TestSubscriberOnARemovedNodeIsNotLeftDeaf(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	ctx := context.Background()
	const ch = "{deaf}ch"
	conns, old, promoted := subscribedThenFailedOver(t, c, ch, router.ClusterConfig{Seeds: c.Addrs()})
	id, err := old.Do(ctx, "CLUSTER", "MYID").ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if n != old {
			if err := n.Do(ctx, "CLUSTER", "FORGET", id).Error(); err != nil {
				t.Fatalf("CLUSTER FORGET on %s: %v", n.Addr, err)
			}
		}
	}
	if err := old.Do(ctx, "CLUSTER", "RESET").Error(); err != nil {
		t.Fatalf("CLUSTER RESET: %v", err)
	}

	for loops, rc := range conns {
		deadline := time.Now().Add(15 * time.Second)
		for {
			if time.Now().After(deadline) {
				t.Fatalf("loops %d: the subscriber neither gets the messages published after its node left the cluster nor is ended", loops)
			}
			if err := promoted.Do(ctx, "PUBLISH", ch, "m").Error(); err != nil {
				t.Fatal(err)
			}
			rc.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			r, err := reply.Read(rc.br, nil)
			if err == nil {
				if !strings.Contains(string(r), "$1\r\nm\r\n") {
					t.Fatalf("loops %d: %q", loops, r)
				}
				break
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.Logf("loops %d: the subscriber was ended: %v", loops, err)
			break
		}
	}
}

// subscribedThenFailedOver subscribes a client on each serving path (a
// router of cfg each) to ch, then fails ch's primary over to a replica by
// hand (CLUSTER FAILOVER), and answers the clients, the demoted primary
// and the promoted one.
func subscribedThenFailedOver(t *testing.T, c *clustertest.Cluster, ch string, cfg router.ClusterConfig) (conns map[int]*rawConn, old, promoted *clustertest.Node) {
	t.Helper()
	ctx := context.Background()
	old = primaryOf(t, c, ch)
	promoted = replicasOf(t, c, old)[0]
	conns = onEachPath(t, cfg)
	want := "*3\r\n$9\r\nsubscribe\r\n$" + strconv.Itoa(len(ch)) + "\r\n" + ch + "\r\n:1\r\n"
	for loops, rc := range conns {
		if got := rc.do("SUBSCRIBE", ch); got != want {
			t.Fatalf("loops %d: SUBSCRIBE: %q", loops, got)
		}
	}
	if err := promoted.Do(ctx, "CLUSTER", "FAILOVER").Error(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the replica is promoted", func() bool {
		p, err := c.Primary(ctx, slot.Of(ch))
		return err == nil && p == promoted
	})
	return conns, old, promoted
}
