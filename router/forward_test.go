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

// forward sends one command through r and waits for its reply.
func forward(t *testing.T, r *router.Cluster, args ...string) string {
	t.Helper()
	return forwardIn(t, r, false, args...)
}

// forwardIn is forward in RESP3 or RESP2.
func forwardIn(t *testing.T, r *router.Cluster, resp3 bool, args ...string) string {
	t.Helper()
	return forwardAs(t, r, router.Forward{RESP3: resp3}, args...)
}

// forwardAs is forward with f's options (its Slot and Cmd are args').
func forwardAs(t *testing.T, r *router.Cluster, f router.Forward, args ...string) string {
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
	f.Slot, f.Cmd = sl, router.AppendCommand(nil, bs)
	r.Forward(context.Background(), nil, []router.Forward{f}, replies,
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

// With ReadFromReplicas, a read-only command goes to a replica of its
// slot's primary; a write still goes to the primary.
func TestForwardReadsFromReplicas(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{ReadFromReplicas: true})
	waitConnected(t, r)
	ctx := context.Background()
	if got := forward(t, r, "SET", "rr:k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	primary, err := c.Primary(ctx, slot.Of("rr:k"))
	if err != nil {
		t.Fatal(err)
	}
	gets := func(n *clustertest.Node) int {
		stats, err := n.Do(ctx, "INFO", "commandstats").ToString()
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := strings.Cut(stats, "cmdstat_get:calls=")
		if !ok {
			return 0
		}
		v, _ := strconv.Atoi(after[:strings.IndexByte(after, ',')])
		return v
	}
	onReplicas := func() int {
		n := 0
		for _, node := range c.Nodes {
			if node != primary {
				n += gets(node)
			}
		}
		return n
	}
	// The router learns the replicas from the slot map, which a replica
	// may join after the cluster formed; and a replica lags its primary.
	waitFor(t, 5*time.Second, "a GET reaches a replica that has the write", func() bool {
		return forwardAs(t, r, router.Forward{ReadOnly: true}, "GET", "rr:k") == "$1\r\nv\r\n" && onReplicas() > 0
	})
	for _, n := range c.Nodes {
		if err := n.Do(ctx, "CONFIG", "RESETSTAT").Error(); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		if got := forwardAs(t, r, router.Forward{ReadOnly: true}, "GET", "rr:k"); got != "$1\r\nv\r\n" {
			t.Fatalf("GET from a replica: %q", got)
		}
	}
	if got := forward(t, r, "SET", "rr:k", "w"); got != "+OK\r\n" {
		t.Fatalf("SET once reads go to replicas: %q", got)
	}
	if p, rs := gets(primary), onReplicas(); p != 0 || rs != 10 {
		t.Errorf("GETs: %d on the primary, %d on the others; want all 10 on a replica", p, rs)
	}
}
