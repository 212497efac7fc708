package router_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// forward sends one command through r and waits for its reply.
func forward(t *testing.T, r *router.Cluster, args ...string) string {
	t.Helper()
	return forwardIn(t, r, false, args...)
}

// forwardIn is forward in RESP3 or RESP2.
func forwardIn(t *testing.T, r *router.Cluster, resp3 bool, args ...string) string {
	t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	sl := router.AnySlot
	if len(args) > 1 {
		sl = slot.Of(args[1])
	}
	replies := make([][]byte, 1)
	got := make(chan struct{})
	r.Forward(context.Background(), []router.Forward{{Slot: sl, Cmd: router.AppendCommand(nil, bs), RESP3: resp3}}, replies,
		func([]int) { close(got) })
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatalf("%q: no reply in 30s", args)
	}
	return string(replies[0])
}

// A hung node (SIGSTOP) answers its forwarded commands an error once
// ForwardTimeout has passed; the other nodes' commands go on, and the
// node's commands work again once it is back.
func TestForwardToAHungNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{ForwardTimeout: 300 * time.Millisecond})
	waitConnected(t, r)
	ctx := context.Background()
	keys := []string{"fw:0", "fw:1", "fw:2", "fw:3", "fw:4", "fw:5"}
	owners := map[string]*clustertest.Node{}
	for _, k := range keys {
		n, err := c.Primary(ctx, slot.Of(k))
		if err != nil {
			t.Fatal(err)
		}
		owners[k] = n
		if got := forward(t, r, "SET", k, "v"); got != "+OK\r\n" {
			t.Fatalf("SET %s: %q", k, got)
		}
	}
	hung := owners[keys[0]]
	if err := hung.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got := forward(t, r, "GET", keys[0])
	took := time.Since(start)
	if !strings.HasPrefix(got, "-ERR sluice: connection to "+hung.Addr+" failed") {
		t.Errorf("GET on the hung node: %q, want an error naming it", got)
	}
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("GET on the hung node answered after %v, want the 300ms timeout", took)
	}
	healthy := 0
	for _, k := range keys[1:] {
		if owners[k] == hung {
			continue
		}
		healthy++
		if got := forward(t, r, "GET", k); got != "$1\r\nv\r\n" {
			t.Errorf("GET %s on a healthy node: %q", k, got)
		}
	}
	if healthy == 0 {
		t.Fatal("every key is on the hung node: the test needs keys elsewhere")
	}
	if err := hung.Resume(); err != nil {
		t.Fatal(err)
	}
	if got := forward(t, r, "GET", keys[0]); got != "$1\r\nv\r\n" {
		t.Errorf("GET once the node is back: %q", got)
	}
}

// A command forwarded for a RESP3 client gets the node's RESP3 reply, on
// the shared connections and on a blocking command's own alike.
func TestForwardInRESP3(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{})
	waitConnected(t, r)
	forward(t, r, "HSET", "r3:h", "f", "v")
	for _, tc := range []struct {
		resp3 bool
		args  []string
		want  string
	}{
		{true, []string{"HGETALL", "r3:h"}, "%1\r\n$1\r\nf\r\n$1\r\nv\r\n"},
		{false, []string{"HGETALL", "r3:h"}, "*2\r\n$1\r\nf\r\n$1\r\nv\r\n"},
		{true, []string{"GET", "r3:none"}, "_\r\n"},
		{false, []string{"GET", "r3:none"}, "$-1\r\n"},
	} {
		if got := forwardIn(t, r, tc.resp3, tc.args...); got != tc.want {
			t.Errorf("RESP3 %v, %q: %q, want %q", tc.resp3, tc.args, got, tc.want)
		}
	}
}
