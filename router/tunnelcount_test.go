package router_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A shard channel's count is the client's shard channels once that
// confirmation is in its place, as one node counts them: pipelined
// SSUBSCRIBEs of channels on two primaries, whose later one's node answers
// first, are confirmed 1 then 2, not with the count the nodes reach after
// both (TestPathsAnswerAlike, PATHS_PUBSUB=1 PATHS_RESET=1 seed 1879,
// goroutines: an SSUBSCRIBE of a channel already held answered 2, as
// another node had meanwhile confirmed the SSUBSCRIBE sent after it).
func TestTunnelShardCountInOrder(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: 10 * time.Second})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{})
	waitConnected(t, r)
	ctx := context.Background()
	a, b, na, nb := onTwoPrimaries(t, c, "cnt:")
	bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	conf := func(kind, ch string, n int) string {
		return "*3\r\n" + bulk(kind) + bulk(ch) + ":" + strconv.Itoa(n) + "\r\n"
	}
	tun, got := openTunnel(t, r, false)
	// a's node is slow: b's answers the later command first.
	if err := na.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := na.Resume(); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer resume()
	send(t, tun, "SSUBSCRIBE", a)
	send(t, tun, "SSUBSCRIBE", b)
	shardSubs := func(n *clustertest.Node, ch string) int64 {
		v, err := n.Do(ctx, "PUBSUB", "SHARDNUMSUB", ch).ToArray()
		if err != nil || len(v) != 2 {
			return -1
		}
		k, _ := v[1].AsInt64()
		return k
	}
	// b's node has answered before a's may.
	for deadline := time.Now().Add(5 * time.Second); shardSubs(nb, b) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("b's node has not seen SSUBSCRIBE within 5s")
		}
	}
	resume()
	want := []tunnelData{
		{data: conf("ssubscribe", a, 1), subscribed: true}, {answered: true},
		{data: conf("ssubscribe", b, 2), subscribed: true}, {answered: true},
	}
	for i, w := range want {
		if d := next(t, got); d != w {
			t.Errorf("delivery %d: got %+v, want %+v", i, d, w)
		}
	}
}
