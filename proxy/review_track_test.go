package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// CLIENT CACHING's flag lives as long as Redis 7.0 keeps it: a CLIENT
// TRACKING ON that leaves tracking on keeps it (enableTracking clears the
// modes, not the flag, which then shows under the new mode), and only a
// CLIENT command Redis finds, whatever its arity, leaves it: a bare CLIENT
// or an unknown subcommand is no CLIENT command to Redis, and ends it.
func TestTrackingCachingFlagLastsAsRedis(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	r := newForwarding(t, c)
	steps := [][]string{
		{"CLIENT", "TRACKING", "ON", "OPTIN"},
		{"CLIENT", "CACHING", "yes"},
		{"CLIENT", "TRACKING", "ON", "OPTIN"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "TRACKING", "ON"},
		{"CLIENT", "TRACKING", "ON", "OPTOUT"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "CACHING"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "NOSUCH"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "CACHING", "no"},
		{"CLIENT"},
		{"CLIENT", "TRACKINGINFO"},
	}
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		through := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		node := dialRaw(t, c.Nodes[0].Addr)
		if resp3 {
			through.do("HELLO", "3")
			node.do("HELLO", "3")
		}
		for i, step := range steps {
			if got, want := through.do(step...), node.do(step...); got != want {
				t.Errorf("step %d %q: %q, the node %q", i, step, got, want)
			}
		}
	})
}
