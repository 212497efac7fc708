package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// CLIENT CACHING's modes decide which reads are tracked, as on a node: in
// OPTIN mode only the command after CACHING yes, in OPTOUT mode all but
// the one after CACHING no. A read Redis does not track gets no
// invalidation through sluice either (rueidis's default client, OPTIN,
// got a push after every plain read and script it sent).
func TestTrackingModesDecideWhatIsInvalidated(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		key := "trk:mode:" + t.Name()
		writer := dialRaw(t, c.Nodes[0].Addr)
		for _, tc := range []struct {
			mode    string
			caching []string // CLIENT CACHING's word before the GET, if any
			tracked bool
		}{
			{"OPTIN", nil, false},
			{"OPTIN", []string{"yes"}, true},
			{"OPTOUT", nil, true},
			{"OPTOUT", []string{"no"}, false},
		} {
			for _, conn := range []*rawConn{dialRaw(t, addr), dialRaw(t, c.Nodes[0].Addr)} {
				conn.do("HELLO", "3")
				if got := conn.do("CLIENT", "TRACKING", "ON", tc.mode); got != "+OK\r\n" {
					t.Fatalf("CLIENT TRACKING ON %s: %q", tc.mode, got)
				}
				for _, w := range tc.caching {
					if got := conn.do("CLIENT", "CACHING", w); got != "+OK\r\n" {
						t.Fatalf("CLIENT CACHING %s: %q", w, got)
					}
				}
				conn.do("GET", key)
				writer.do("SET", key, "v")
				conn.send([]string{"PING"})
				want := "+PONG\r\n"
				if tc.tracked {
					want = invalidate(key)
				}
				if got := conn.read(); got != want {
					t.Errorf("%s, CACHING %v, GET, a write elsewhere, PING: %q first, want %q", tc.mode, tc.caching, got, want)
				}
			}
		}
	})
}
