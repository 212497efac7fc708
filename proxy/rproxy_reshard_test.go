package proxy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A fan-out that reads (DBSIZE, KEYS) right after a resharding moved a
// primary's lowest slot to the other primary, before sluice reads the new
// slot map: each primary is counted once. The part sent to the first
// primary ran there, a primary still; checked by the slot it lost (MOVED),
// it was sent again to the second, whose keys were counted twice and the
// first's not at all. Both serving paths.
func TestFanOutReadRightAfterAReshard(t *testing.T) {
	// A spare shape: the third primary keeps its slots, and its keys
	// count once as ever.
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	a := primaryOf(t, c, "{06S}x") // slot 0's
	b := c.Nodes[0]
	if b == a {
		b = c.Nodes[1]
	}
	var keys []string
	on := map[*clustertest.Node]int{}
	for i := 0; on[a] < 5 || on[b] < 3; i++ {
		k := fmt.Sprintf("rproxy%d", i)
		n := primaryOf(t, c, k)
		if slot.Of(k) == 0 || (n == a && on[a] == 5) || (n == b && on[b] == 3) || (n != a && n != b && on[n] == 2) {
			continue
		}
		on[n]++
		keys = append(keys, k)
		if got, err := nodeDo(n, "SET", k, "v"); got != "+OK\r\n" {
			t.Fatalf("SET %s on %s: %q %v", k, n.Addr, got, err)
		}
	}
	type path struct {
		name string
		conn *rawConn
		r    *router.Cluster
	}
	var paths []path
	for _, p := range []struct {
		name  string
		loops int
	}{{"loops", 0}, {"goroutines", -1}} {
		// No heartbeat (Share): its key, written at any time beside the
		// loop, would change the count between the nodes' and sluice's.
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1,
			TopologyInterval: time.Hour, Share: 1})
		waitRouter(t, r)
		paths = append(paths, path{p.name, dialRaw(t, serveConfig(t, proxy.Config{Loops: p.loops, Decider: r, Forwarder: r})), r})
	}
	size := func(n *clustertest.Node) int {
		got, _ := nodeDo(n, "DBSIZE")
		var v int
		fmt.Sscanf(got, ":%d", &v)
		return v
	}
	// What the nodes hold besides: sluice's own keys, say.
	sizes := func() (sizes []int, sum int) {
		for _, n := range c.Nodes {
			sizes = append(sizes, size(n))
			sum += sizes[len(sizes)-1]
		}
		return sizes, sum
	}
	_, total := sizes()
	want := fmt.Sprintf(":%d\r\n", total)
	for _, n := range []*clustertest.Node{b, a} {
		if got, err := nodeDo(n, "CLUSTER", "SETSLOT", "0", "NODE", b.ID); got != "+OK\r\n" {
			t.Fatalf("CLUSTER SETSLOT 0 NODE on %s: %q %v", n.Addr, got, err)
		}
	}
	waitUntil(t, "the first primary sends slot 0 to the second", func() bool {
		got, _ := nodeDo(a, "EXISTS", "{06S}x") // slot 0
		return strings.HasPrefix(got, "-MOVED 0 "+b.Addr)
	})
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			if got := p.conn.do("DBSIZE"); got != want {
				held, _ := sizes()
				t.Errorf("DBSIZE: %q, want %q (%v on the primaries)", got, want, held)
			}
			got := p.conn.do("KEYS", "rproxy*")
			var listed []string
			for _, l := range strings.Split(got, "\r\n") {
				if strings.HasPrefix(l, "rproxy") {
					listed = append(listed, l)
				}
			}
			slices.Sort(listed)
			sorted := slices.Clone(keys)
			slices.Sort(sorted)
			if !slices.Equal(listed, sorted) {
				t.Errorf("KEYS rproxy*: %v, want %v", listed, sorted)
			}
		})
	}
}
