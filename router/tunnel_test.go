package router_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// tunnelData is what a tunnel delivered, or that a command was answered.
type tunnelData struct {
	data       string
	subscribed bool
	answered   bool
}

// openTunnel opens a tunnel whose deliveries arrive on the returned
// channel, each answer after the data delivered with it; its end fails
// the test.
func openTunnel(t *testing.T, r *router.Cluster, resp3 bool) (*router.Tunnel, chan tunnelData) {
	t.Helper()
	got := make(chan tunnelData, 64)
	tun := r.Tunnel(resp3, func(data []byte, subscribed, answered bool) {
		if data != nil {
			got <- tunnelData{data: string(data), subscribed: subscribed}
		}
		if answered {
			got <- tunnelData{answered: true}
		}
	}, func(err error) {
		t.Errorf("the tunnel ended: %v", err)
	})
	t.Cleanup(tun.Close)
	return tun, got
}

func send(t *testing.T, tun *router.Tunnel, args ...string) {
	t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	if err := tun.Send(bs); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
}

func next(t *testing.T, got chan tunnelData) tunnelData {
	t.Helper()
	select {
	case d := <-got:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("nothing from the tunnel in 10s")
		return tunnelData{}
	}
}

// onTwoPrimaries returns two channels whose slots two different primaries
// own, and those primaries.
func onTwoPrimaries(t *testing.T, c *clustertest.Cluster, prefix string) (a, b string, na, nb *clustertest.Node) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		ch := prefix + strconv.Itoa(i)
		n, err := c.Primary(ctx, slot.Of(ch))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case na == nil:
			a, na = ch, n
		case n != na:
			return a, ch, na, n
		}
	}
	t.Fatal("no two channels on two primaries")
	return
}

// A subscriber's shard channels on two primaries, through one tunnel:
// each node serves its own, the counts are the client's across both, an
// SUNSUBSCRIBE of all reaches both, channels of two slots are refused, and
// a slot that moves away is told to the client (Redis 7's sunsubscribe),
// which subscribes again at the new owner through a MOVED.
func TestTunnelShardChannelsOnTwoPrimaries(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{})
	waitConnected(t, r)
	for _, resp3 := range []bool{false, true} {
		t.Run("resp3="+strconv.FormatBool(resp3), func(t *testing.T) {
			prefix := "sc" + strconv.FormatBool(resp3) + ":"
			a, b, _, nb := onTwoPrimaries(t, c, prefix)
			arr := "*3\r\n"
			if resp3 {
				arr = ">3\r\n"
			}
			bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
			conf := func(kind, ch string, n int) string {
				return arr + bulk(kind) + bulk(ch) + ":" + strconv.Itoa(n) + "\r\n"
			}
			tun, got := openTunnel(t, r, resp3)
			expect := func(what, want string, subscribed bool) {
				t.Helper()
				if d := next(t, got); d.data != want || d.subscribed != subscribed || d.answered {
					t.Errorf("%s: got %q (subscribed %v, answered %v), want %q (%v)", what, d.data, d.subscribed, d.answered, want, subscribed)
				}
			}
			// Each command is answered once, after all its replies: a
			// MOVED on the way does not answer it early.
			answered := func(what string) {
				t.Helper()
				if d := next(t, got); !d.answered {
					t.Errorf("%s: got %q, want the command answered", what, d.data)
				}
			}

			send(t, tun, "SSUBSCRIBE", a)
			expect("SSUBSCRIBE a", conf("ssubscribe", a, 1), true)
			answered("SSUBSCRIBE a")
			send(t, tun, "SSUBSCRIBE", b)
			expect("SSUBSCRIBE b on another primary", conf("ssubscribe", b, 2), true)
			answered("SSUBSCRIBE b")
			send(t, tun, "SSUBSCRIBE", a, b)
			expect("SSUBSCRIBE of two slots", "-CROSSSLOT Keys in request don't hash to the same slot\r\n", true)
			answered("SSUBSCRIBE of two slots")
			for _, ch := range []string{b, a} {
				if got := forward(t, r, "SPUBLISH", ch, "m"+ch); got != ":1\r\n" {
					t.Fatalf("SPUBLISH %s: %q", ch, got)
				}
				expect("smessage", arr+bulk("smessage")+bulk(ch)+bulk("m"+ch), true)
			}
			send(t, tun, "SUBSCRIBE", prefix+"o", prefix+"p")
			expect("SUBSCRIBE", conf("subscribe", prefix+"o", 1), true)
			expect("SUBSCRIBE", conf("subscribe", prefix+"p", 2), true)
			answered("SUBSCRIBE")
			send(t, tun, "PING")
			pong := "*2\r\n" + bulk("pong") + bulk("")
			if resp3 {
				pong = "+PONG\r\n"
			}
			expect("PING", pong, true)
			answered("PING")

			// SUNSUBSCRIBE of all: both nodes drop theirs, in whichever
			// order they answer; the counts fall to 0.
			send(t, tun, "SUNSUBSCRIBE")
			first, second := next(t, got), next(t, got)
			if first.data != conf("sunsubscribe", a, 1) && first.data != conf("sunsubscribe", b, 1) {
				t.Errorf("SUNSUBSCRIBE's first confirmation: %q", first.data)
			}
			if second.data != conf("sunsubscribe", a, 0) && second.data != conf("sunsubscribe", b, 0) || first.data[:len(first.data)-4] == second.data[:len(second.data)-4] {
				t.Errorf("SUNSUBSCRIBE's second confirmation: %q after %q", second.data, first.data)
			}
			answered("SUNSUBSCRIBE")
			// With none left, the null confirmation comes once, not from
			// each node.
			send(t, tun, "SUNSUBSCRIBE")
			null := "$-1\r\n"
			if resp3 {
				null = "_\r\n"
			}
			expect("SUNSUBSCRIBE with none left", arr+bulk("sunsubscribe")+null+":0\r\n", true)
			answered("SUNSUBSCRIBE with none left")
			send(t, tun, "UNSUBSCRIBE")
			// In the node's own order: either channel may go first.
			u1, u2 := next(t, got), next(t, got)
			o1, p1 := conf("unsubscribe", prefix+"o", 1), conf("unsubscribe", prefix+"p", 1)
			o0, p0 := conf("unsubscribe", prefix+"o", 0), conf("unsubscribe", prefix+"p", 0)
			if !(u1.data == o1 && u2.data == p0 || u1.data == p1 && u2.data == o0) || !u1.subscribed || u2.subscribed {
				t.Errorf("UNSUBSCRIBE: got %+v then %+v", u1, u2)
			}
			answered("UNSUBSCRIBE")

			// Resharding: the node tells the client it lost the channel;
			// subscribing again meets the old owner (MOVED) and reaches
			// the new one.
			send(t, tun, "SSUBSCRIBE", a)
			expect("SSUBSCRIBE a again", conf("ssubscribe", a, 1), true)
			answered("SSUBSCRIBE a again")
			if err := c.MoveSlot(context.Background(), slot.Of(a), nb); err != nil {
				t.Fatal(err)
			}
			expect("the slot moved away", conf("sunsubscribe", a, 0), false)
			send(t, tun, "SSUBSCRIBE", a)
			expect("SSUBSCRIBE after the move", conf("ssubscribe", a, 1), true)
			answered("SSUBSCRIBE after the move")
			if got := forward(t, r, "SPUBLISH", a, "moved"); got != ":1\r\n" {
				t.Fatalf("SPUBLISH after the move: %q", got)
			}
			expect("smessage from the new owner", arr+bulk("smessage")+bulk(a)+bulk("moved"), true)
		})
	}
}

// A tunnel's commands on two connections are answered in the order sent,
// and so are their replies: a shard channel's confirmation from a fast
// node waits for an earlier SUBSCRIBE's from a slow one, as one node
// would have answered them.
func TestTunnelRepliesInOrderAcrossConnections(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: 10 * time.Second})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{})
	waitConnected(t, r)
	ctx := context.Background()
	bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	conf := func(kind, ch string, n int) string {
		return "*3\r\n" + bulk(kind) + bulk(ch) + ":" + strconv.Itoa(n) + "\r\n"
	}
	tun, got := openTunnel(t, r, false)
	send(t, tun, "SUBSCRIBE", "ord:o")
	if d := next(t, got); d.data != conf("subscribe", "ord:o", 1) {
		t.Fatalf("SUBSCRIBE: got %q", d.data)
	}
	if d := next(t, got); !d.answered {
		t.Fatalf("SUBSCRIBE: got %q, want it answered", d.data)
	}
	// home is the node the tunnel's channels went to.
	var home *clustertest.Node
	for _, n := range c.Nodes {
		if v, err := n.Do(ctx, "PUBSUB", "NUMSUB", "ord:o").ToArray(); err == nil && len(v) == 2 {
			if k, _ := v[1].AsInt64(); k == 1 {
				home = n
			}
		}
	}
	if home == nil {
		t.Fatal("no node has the tunnel's channel")
	}
	var shardCh string
	var shardNode *clustertest.Node
	for i := 0; shardCh == ""; i++ {
		ch := "ord:s" + strconv.Itoa(i)
		if n, err := c.Primary(ctx, slot.Of(ch)); err != nil {
			t.Fatal(err)
		} else if n != home {
			shardCh, shardNode = ch, n
		}
	}

	// The home node is slow: the shard node answers the later command
	// first.
	if err := home.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := home.Resume(); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer resume()
	send(t, tun, "SUBSCRIBE", "ord:p")
	send(t, tun, "SSUBSCRIBE", shardCh)
	// The shard node has answered before the home node may.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		v, err := shardNode.Do(ctx, "PUBSUB", "SHARDNUMSUB", shardCh).ToArray()
		if err == nil && len(v) == 2 {
			if k, _ := v[1].AsInt64(); k == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the shard node has not seen SSUBSCRIBE within 5s")
		}
	}
	resume()
	want := []tunnelData{
		{data: conf("subscribe", "ord:p", 2), subscribed: true}, {answered: true},
		{data: conf("ssubscribe", shardCh, 1), subscribed: true}, {answered: true},
	}
	for i, w := range want {
		if d := next(t, got); d != w {
			t.Fatalf("delivery %d: got %+v, want %+v", i, d, w)
		}
	}
}

// A node that hangs with its socket open (SIGSTOP) ends a tunnel once a
// command's fence has waited past the forward timeout: the commands still
// waiting are answered an error naming the node, in order, and then the
// tunnel ends, as it does when a connection is lost. With no command
// pending, a tunnel waits for messages past that bound.
func TestTunnelHungNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{ForwardTimeout: 300 * time.Millisecond})
	waitConnected(t, r)
	got := make(chan tunnelData, 64)
	ended := make(chan error, 1)
	tun := r.Tunnel(false, func(data []byte, subscribed, answered bool) {
		if data != nil {
			got <- tunnelData{data: string(data), subscribed: subscribed}
		}
		if answered {
			got <- tunnelData{answered: true}
		}
	}, func(err error) { ended <- err })
	t.Cleanup(tun.Close)
	expect := func(what, want string) {
		t.Helper()
		if d := next(t, got); !strings.HasPrefix(d.data, want) {
			t.Fatalf("%s: got %+v, want %q...", what, d, want)
		}
		if d := next(t, got); !d.answered {
			t.Fatalf("%s: got %+v, want the command answered", what, d)
		}
	}
	send(t, tun, "SUBSCRIBE", "hang:a")
	expect("SUBSCRIBE", "*3\r\n$9\r\nsubscribe\r\n$6\r\nhang:a\r\n:1\r\n")

	// Idle for twice the bound: time must pass, there is nothing to poll.
	time.Sleep(600 * time.Millisecond)
	select {
	case err := <-ended:
		t.Fatalf("an idle tunnel ended: %v", err)
	default:
	}
	// The count is the receiving node's own subscribers: 0 or 1.
	if got := forward(t, r, "PUBLISH", "hang:a", "m"); got != ":1\r\n" && got != ":0\r\n" {
		t.Fatalf("PUBLISH: %q", got)
	}
	if d := next(t, got); d.data != "*3\r\n$7\r\nmessage\r\n$6\r\nhang:a\r\n$1\r\nm\r\n" {
		t.Fatalf("message after an idle wait: got %+v", d)
	}

	var home *clustertest.Node
	for _, n := range c.Nodes {
		if v, err := n.Do(context.Background(), "PUBSUB", "NUMSUB", "hang:a").ToArray(); err == nil && len(v) == 2 {
			if k, _ := v[1].AsInt64(); k == 1 {
				home = n
			}
		}
	}
	if home == nil {
		t.Fatal("no node has the tunnel's channel")
	}
	if err := home.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { home.Resume() })
	start := time.Now()
	send(t, tun, "SUBSCRIBE", "hang:b")
	send(t, tun, "PING")
	failed := "-ERR sluice: connection to " + home.Addr + " failed: "
	expect("SUBSCRIBE to the hung node", failed)
	expect("PING to the hung node", failed)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel did not end")
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("the tunnel ended after %v, want the 300ms timeout", took)
	}
	if err := tun.Send([][]byte{[]byte("PING")}); err == nil {
		t.Error("PING on the ended tunnel: no error")
	}
}
