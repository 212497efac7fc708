package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// A shadow policy's sluice_shadow_limited_total is there from the start
// at 0 and, like every policy counter, stays after a reload enforces the
// policy or removes it: a roll-out that saw no would-be denial and then
// turned shadow off must not see its series vanish.
func TestShadowSeriesOutlivesAReload(t *testing.T) {
	paid := proxy.Policy{Name: "paid", Capacity: 2, Refill: 1, Period: "1h", Shadow: true}
	srv, _ := serveServer(t, proxy.Config{Decider: router.NewMemory(0), Backend: "test",
		Policies: mustPolicies(t, []proxy.Policy{paid}, nil)})
	const series = `sluice_shadow_limited_total{policy="paid"} 0`
	if text := scrape(t, srv); !strings.Contains(text, series) {
		t.Fatalf("a shadow policy: metrics lack %q", series)
	}
	paid.Shadow = false
	srv.SetPolicies(mustPolicies(t, []proxy.Policy{paid}, nil))
	if text := scrape(t, srv); !strings.Contains(text, series) {
		t.Errorf("shadow turned off by a reload: metrics lack %q", series)
	}
	srv.SetPolicies(nil)
	if text := scrape(t, srv); !strings.Contains(text, series) {
		t.Errorf("the policy removed by a reload: metrics lack %q", series)
	}
}
