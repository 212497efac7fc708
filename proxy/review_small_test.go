package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
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

// Redis's INFO has a Keyspace section even with no keys, a bare header;
// with no cluster behind it sluice left the section out.
func TestEmbeddedInfoHasBareKeyspace(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0)}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		for _, resp3 := range []bool{false, true} {
			if resp3 {
				conn.do("HELLO", "3")
			}
			for _, cmd := range [][]string{{"INFO", "keyspace"}, {"INFO"}, {"INFO", "all"}, {"INFO", "server", "keyspace"}} {
				got := conn.do(cmd...)
				body := got[strings.Index(got, "\r\n")+2:]
				if resp3 {
					body = strings.TrimPrefix(body, "txt:")
				}
				if !strings.HasSuffix(body, "# Keyspace\r\n\r\n") || strings.Count(body, "# Keyspace") != 1 {
					t.Errorf("RESP3 %v: %q: %q, want one bare # Keyspace at the end", resp3, cmd, got)
				}
				if len(cmd) == 2 && cmd[1] == "keyspace" {
					if body != "# Keyspace\r\n\r\n" {
						t.Errorf("RESP3 %v: %q: %q, want the bare header", resp3, cmd, got)
					}
				} else if !strings.Contains(body, "\r\n\r\n# Keyspace\r\n") {
					t.Errorf("RESP3 %v: %q: %q, want # Keyspace after a blank line", resp3, cmd, got)
				}
			}
		}
		if got := conn.do("INFO", "server"); strings.Contains(got, "Keyspace") {
			t.Errorf("INFO server: %q, want no Keyspace", got)
		}
	})
}
