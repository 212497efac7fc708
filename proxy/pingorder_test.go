package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A RESP2 subscriber pipelines a PING, a command refused in subscribed
// mode, an SSUBSCRIBE of a shard channel on another primary, a second
// PING and another refused command, while the nodes are slow (paused
// until the pipeline is taken up to the SSUBSCRIBE): each reply comes in
// the order sent, the bytes redis-server 7.0 sends. Both serving paths.
// (The tunnel once took the first PING's pong, still on its way, for the
// second PING's; since an SSUBSCRIBE is answered before the next command
// is taken, the second PING is not sent meanwhile, and
// TestTunnelPingBeforeAMergedPing keeps that case in the router.)
func TestPassthroughSubscribedPingBeforeARefusal(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		// A channel and a shard channel on two primaries.
		ch := "pingorder:" + t.Name()
		home, err := c.Primary(ctx, slot.Of(ch))
		if err != nil {
			t.Fatal(err)
		}
		var sch string
		var shard *clustertest.Node
		for i := 0; shard == nil; i++ {
			sch = "pingorder:s" + strconv.Itoa(i)
			if n, err := c.Primary(ctx, slot.Of(sch)); err != nil {
				t.Fatal(err)
			} else if n != home {
				shard = n
			}
		}
		sub, admin := dialRaw(t, addr), dialRaw(t, addr)
		if got := sub.do("CLIENT", "SETNAME", "pingorder"); got != "+OK\r\n" {
			t.Fatalf("CLIENT SETNAME: %q", got)
		}
		bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
		if got, want := sub.do("SUBSCRIBE", ch), "*3\r\n"+bulk("subscribe")+bulk(ch)+":1\r\n"; got != want {
			t.Fatalf("SUBSCRIBE: %q, want %q", got, want)
		}

		for _, n := range []*clustertest.Node{home, shard} {
			if err := n.Pause(); err != nil {
				t.Fatal(err)
			}
			defer n.Resume()
		}
		sub.send([]string{"PING", "first"}, []string{"GET", "k"}, []string{"SSUBSCRIBE", sch},
			[]string{"PING", "second"}, []string{"DEL", "k"})
		// Taken up to the SSUBSCRIBE, which the rest waits for (its slot
		// may have moved: a MOVED sends it on to another node, where what
		// follows it must not run first).
		waitUntil(t, "the pipeline is taken", func() bool {
			for _, line := range strings.Split(admin.do("CLIENT", "LIST"), "\n") {
				if strings.Contains(line, " name=pingorder ") {
					return strings.Contains(line, " cmd=ssubscribe ")
				}
			}
			return false
		})
		// The channel's node answers first: the shard channel's node is
		// resumed once the first has written its replies to the
		// subscriber's connection (the one with a channel), which is
		// idle then.
		if err := home.Resume(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the channel's node answers", func() bool {
			list, err := home.Do(ctx, "CLIENT", "LIST").ToString()
			if err != nil {
				return false
			}
			for _, line := range strings.Split(list, "\n") {
				if strings.Contains(line, " sub=1 ") {
					return strings.Contains(line, " qbuf=0 ") && strings.Contains(line, " obl=0 oll=0 ") && strings.Contains(line, " cmd=ping ")
				}
			}
			return false
		})
		if err := shard.Resume(); err != nil {
			t.Fatal(err)
		}
		pong := func(s string) string { return "*2\r\n" + bulk("pong") + bulk(s) }
		refused := func(name string) string {
			return "-ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
		}
		for _, want := range []string{pong("first"), refused("get"), "*3\r\n" + bulk("ssubscribe") + bulk(sch) + ":1\r\n", pong("second"), refused("del")} {
			if got := sub.read(); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
		if got, want := sub.do("PING"), pong(""); got != want {
			t.Fatalf("PING after: %q, want %q", got, want)
		}
	})
}
