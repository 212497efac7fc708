package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// SWAPDB is refused as a cluster node refuses it, byte for byte, on both
// serving paths; its wrong arity as Redis's too.
func TestSwapDBAsACluster(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		for _, args := range [][]string{{"SWAPDB", "0", "1"}, {"SWAPDB", "0"}} {
			if got, want := conn.do(args...), direct(t, c, -1, args...); got != want {
				t.Errorf("loops %d: %q: %q, want the node's %q", loops, args, got, want)
			}
		}
	}
}
