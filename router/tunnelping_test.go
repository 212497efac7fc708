package router_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A RESP2 subscriber's PING sent on its channel connection alone, then,
// before its pong is back, an SSUBSCRIBE and a second PING (sent to that
// connection and the shard channel's): the first PING is answered its own
// pong, not nothing, and the second gets one pong. The tunnel took the
// first PING's pong, still on its way, for the second's (a PING sent
// on one connection was not counted among that connection's PINGs), so the
// first was answered empty and the client's later replies came before
// its pong.
func TestTunnelPingBeforeAMergedPing(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{})
	waitConnected(t, r)
	ch, sch, home, shard := onTwoPrimaries(t, c, "pingorder:")
	if n, err := c.Primary(context.Background(), slot.Of(ch)); err != nil || n != home {
		t.Fatalf("the channel's primary: %v", err)
	}
	tun, got := openTunnel(t, r, false)
	bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	expect := func(what, want string) {
		t.Helper()
		if d := next(t, got); d.data != want || d.answered {
			t.Fatalf("%s: got %q (answered %v), want %q", what, d.data, d.answered, want)
		}
	}
	answered := func(what string) {
		t.Helper()
		if d := next(t, got); !d.answered {
			t.Fatalf("%s: got %q, want the command answered", what, d.data)
		}
	}
	send(t, tun, "SUBSCRIBE", ch) // the channel connection, on ch's primary
	expect("SUBSCRIBE", "*3\r\n"+bulk("subscribe")+bulk(ch)+":1\r\n")
	answered("SUBSCRIBE")

	// Both nodes paused: the commands are all sent before either
	// answers, and the channel connection's node answers first.
	for _, n := range []*clustertest.Node{home, shard} {
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
		defer n.Resume()
	}
	send(t, tun, "PING", "first")   // the channel connection alone
	send(t, tun, "SSUBSCRIBE", sch) // a shard connection, another primary
	send(t, tun, "PING", "second")  // both connections
	if err := home.Resume(); err != nil {
		t.Fatal(err)
	}
	pong := func(s string) string { return "*2\r\n" + bulk("pong") + bulk(s) }
	expect("the first PING", pong("first"))
	answered("the first PING")
	if err := shard.Resume(); err != nil {
		t.Fatal(err)
	}
	expect("SSUBSCRIBE", "*3\r\n"+bulk("ssubscribe")+bulk(sch)+":1\r\n")
	answered("SSUBSCRIBE")
	expect("the second PING", pong("second"))
	answered("the second PING")
}
