package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// In RESP2's subscribed mode a subscription command of a wrong arity is
// refused before it runs, as a node refuses it: the node's error, counted
// in commandstats as rejected, not failed, and not counted as forwarded
// (sent through the tunnel, the node's error counted as a call that
// failed). PING's arity takes any number of arguments: past one it is
// the command that fails, on the node, as there.
func TestSubscribedWrongArityIsRejected(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	steps := [][]string{{"SUBSCRIBE", "a"}, {"SUBSCRIBE"}, {"PING", "a", "b"}, {"SSUBSCRIBE"}}
	run := func(addr string) (replies []string, delta map[string]callCounts) {
		before := commandstats(t, dialRaw(t, addr))
		conn := dialRaw(t, addr)
		for _, s := range steps {
			replies = append(replies, conn.do(s...))
		}
		after := commandstats(t, dialRaw(t, addr))
		delta = map[string]callCounts{}
		for _, name := range []string{"subscribe", "ping", "ssubscribe"} {
			a, b := after[name], before[name]
			delta[name] = callCounts{a.calls - b.calls, a.rejected - b.rejected, a.failed - b.failed}
		}
		return replies, delta
	}
	wantReplies, node := run(c.Addrs()[0])
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		srv, addr := serveServer(t, cfg)
		replies, got := run(addr)
		for i := range steps {
			if replies[i] != wantReplies[i] {
				t.Errorf("%q: %q, want the node's %q", steps[i], replies[i], wantReplies[i])
			}
		}
		// A node's calls of PING may include its other clients' (a
		// router's probes): only what a client's own commands add is
		// compared.
		for name, want := range node {
			if g := got[name]; g.rejected != want.rejected || g.failed != want.failed || (name != "ping" && g.calls != want.calls) {
				t.Errorf("%s: calls %d, rejected %d, failed %d; want the node's %d, %d, %d", name, g.calls, g.rejected, g.failed, want.calls, want.rejected, want.failed)
			}
		}
		if fwd := passthrough(t, srv); fwd["subscribe"] != 1 || fwd["ping"] != 1 || fwd["ssubscribe"] != 0 {
			t.Errorf("forwarded %v, want one subscribe, one ping and nothing refused", fwd)
		}
	})
}
