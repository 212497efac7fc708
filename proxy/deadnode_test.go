package proxy_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A command for a primary sluice cannot connect to (killed, its replica
// not yet promoted) was never sent: it answers CLUSTERDOWN, the code a
// node gives for a slot no primary serves, which cluster clients retry
// after a pause (as they retry a node that refuses them), where an ERR
// goes to the application at once. A GET on another primary's key is
// untouched.
func TestCommandForAnUnreachableNodeIsClusterDown(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	victim := c.Nodes[0]
	dead, live := nameOn(t, c, victim, "dead"), nameOn(t, c, c.Nodes[1], "live")
	dead2 := dead
	for i := 0; slot.Of(dead2) == slot.Of(dead); i++ {
		dead2 = nameOn(t, c, victim, "dead"+strconv.Itoa(i)+"-")
	}
	r := newForwarding(t, c)
	victim.Kill()
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		cl := dialRaw(t, serveConfig(t, cfg))
		want := "-CLUSTERDOWN sluice: connection to " + victim.Addr + " failed: "
		// A read whose other part ran is retried harmlessly.
		for _, cmd := range [][]string{{"GET", dead}, {"SET", dead, "v"}, {"MGET", dead, dead2}, {"DEL", dead, dead2}, {"MGET", live, dead}, {"EXISTS", live, dead}} {
			if got := cl.do(cmd...); !strings.HasPrefix(got, want) {
				t.Errorf("%q: %q, want %q...", cmd, got, want)
			}
		}
		// A command split over the slots, whose part on a live primary
		// ran: retried whole it would run again there, so not CLUSTERDOWN.
		want = "-ERR sluice: connection to " + victim.Addr + " failed: "
		for _, cmd := range [][]string{{"MSET", live, "v", dead, "v"}, {"DEL", live, dead}} {
			if got := cl.do(cmd...); !strings.HasPrefix(got, want) {
				t.Errorf("%q: %q, want %q...", cmd, got, want)
			}
		}
		if got := cl.do("GET", live); got != "$-1\r\n" {
			t.Errorf("GET of a live primary's key: %q", got)
		}
	})
}
