package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A keyless command that any primary answers (TIME) goes to another
// primary once one is found dead, though no THROTTLE reached that shard:
// the connection the node refused marks it, as a bucket call's failure
// would. Before, about a third of the TIMEs failed until a THROTTLE did.
// Each path has its own router, which learns of the death on its own.
func TestKeylessCommandsPassOverADeadPrimary(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	routers := []struct {
		name  string
		loops int
	}{{"loops", 0}, {"goroutines", -1}}
	addrs := make([]string, len(routers))
	for i, p := range routers {
		r := newForwarding(t, c)
		addrs[i] = serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: p.loops})
	}
	c.Nodes[1].Kill()
	for i, p := range routers {
		conn := dialRaw(t, addrs[i])
		failed := 0
		for range 60 {
			if got := conn.do("TIME"); !strings.HasPrefix(got, "*2\r\n") {
				failed++
			}
		}
		// The first pick of the dead node fails: the command was its.
		if failed > 1 {
			t.Errorf("%s: %d of 60 TIMEs failed with a primary dead", p.name, failed)
		}
	}
}
