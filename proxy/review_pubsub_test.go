package proxy_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// pubsubIDs are the ids of the clients of n that subscribe.
func pubsubIDs(t *testing.T, n *clustertest.Node) []string {
	t.Helper()
	list, err := n.Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").ToString()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range regexp.MustCompile(`\bid=(\d+) `).FindAllStringSubmatch(list, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// newPubsubID is the one id of pubsubIDs(n) not in before.
func newPubsubID(t *testing.T, n *clustertest.Node, before []string) string {
	t.Helper()
	var added []string
	for _, id := range pubsubIDs(t, n) {
		if !slices.Contains(before, id) {
			added = append(added, id)
		}
	}
	if len(added) != 1 {
		t.Fatalf("new subscribers on the node: %v, want one", added)
	}
	return added[0]
}

// A node closes a connection that subscribes to nothing when its timeout
// passes (Redis spares only subscribers), or when it restarts. Once a
// client has unsubscribed from what one of its tunnel's connections held,
// that connection's end loses it nothing: it must not close the client,
// nor its subscriptions on the other connections, as it does not close a
// client that never subscribed. Sluice closed it. Both protocols, both
// serving paths; the home connection (channels) and a shard channel's.
func TestPassthroughSpareSubscriptionConnectionClosedByItsNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	primary := func(ch string) *clustertest.Node {
		n, err := c.Primary(ctx, slot.Of(ch))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	kill := func(n *clustertest.Node, id string) {
		if err := n.Do(ctx, "CLIENT", "KILL", "ID", id).Error(); err != nil {
			t.Fatal(err)
		}
	}
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		for _, resp3 := range []bool{false, true} {
			ch := fmt.Sprintf("spare%d%v", cfg.Loops, resp3)
			home := primary(ch)
			var sch string
			for i := 0; sch == "" || primary(sch) == home; i++ {
				sch = fmt.Sprintf("%s-s%d", ch, i)
			}
			shard := primary(sch)
			confirm, message := "*3\r\n", "*3\r\n$7\r\nmessage\r\n"
			conn := dialRaw(t, addr)
			if resp3 {
				confirm, message = ">3\r\n", ">3\r\n$7\r\nmessage\r\n"
				conn.do("HELLO", "3")
			}
			want := func(got, prefix, suffix string) {
				t.Helper()
				if !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, suffix) {
					t.Fatalf("resp3 %v: %q, want %q...%q", resp3, got, prefix, suffix)
				}
			}

			beforeHome := pubsubIDs(t, home)
			want(conn.do("SUBSCRIBE", ch), confirm, ":1\r\n")
			homeID := newPubsubID(t, home, beforeHome)
			beforeShard := pubsubIDs(t, shard)
			want(conn.do("SSUBSCRIBE", sch), confirm, ":1\r\n")
			shardID := newPubsubID(t, shard, beforeShard)
			want(conn.do("SUNSUBSCRIBE", sch), confirm, ":0\r\n")
			kill(shard, shardID)
			want(conn.do("SSUBSCRIBE", sch), confirm, ":1\r\n")
			if err := home.Do(ctx, "PUBLISH", ch, "hi").Error(); err != nil {
				t.Fatal(err)
			}
			want(conn.read(), message, "$2\r\nhi\r\n")

			want(conn.do("SUNSUBSCRIBE", sch), confirm, ":0\r\n")
			want(conn.do("UNSUBSCRIBE", ch), confirm, ":0\r\n")
			kill(home, homeID)
			want(conn.do("SUBSCRIBE", ch), confirm, ":1\r\n")
			want(conn.do("UNSUBSCRIBE", ch), confirm, ":0\r\n")
			want(conn.do("PING"), "+PONG\r\n", "")
		}
	})
}
