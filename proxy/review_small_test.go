package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// An MSET whose last key has no value, its keys in several slots, is
// CROSSSLOT at a cluster node (it checks the keys' slots before MSET
// counts its arguments); sluice answered a wrong number of arguments.
// With the keys in one slot the node goes on to count them.
func TestOddMSetAcrossSlotsIsCrossSlot(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	const crossSlot = "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
	node := dialRaw(t, c.Nodes[0].Addr)
	var conns []*rawConn
	for _, loops := range []int{0, -1} {
		conns = append(conns, dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})))
	}
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"MSET", "{A}m1", "1", "B"}, crossSlot},
		{[]string{"MSET", "a", "1", "b"}, crossSlot},
		{[]string{"MSET", "{A}m1", "1", "B", "2", "C"}, crossSlot},
		{[]string{"MSETNX", "{A}m1", "1", "B"}, crossSlot},
		{[]string{"MSET", "{a}x", "1", "{a}y"}, "-ERR wrong number of arguments for 'mset' command\r\n"},
		{[]string{"MSETNX", "{a}x", "1", "{a}y"}, "-ERR wrong number of arguments for 'msetnx' command\r\n"},
	} {
		if tc.want == crossSlot {
			if got := node.do(tc.cmd...); got != tc.want {
				t.Fatalf("node %q: %q, the test expects %q", tc.cmd, got, tc.want)
			}
		}
		for i, conn := range conns {
			if got := conn.do(tc.cmd...); got != tc.want {
				t.Errorf("path %d: %q: got %q, want %q", i, tc.cmd, got, tc.want)
			}
			if got := conn.do("MGET", "{A}m1", "B", "a", "{a}x"); got != "*4\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n" {
				t.Errorf("path %d: after %q: MGET %q, want nothing written", i, tc.cmd, got)
			}
		}
	}
}
