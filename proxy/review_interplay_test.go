package proxy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A hot key's calls queued behind its step in flight are decided in one
// step, and a client's pipeline on the key must still be decided in its
// order: a peek between two takes of one limit and cost reports the bucket
// after the first take only, as it would on a key that is not hot. (They
// were grouped by limit and cost across the batch, so every take ran
// before every peek queued among them.) HotSplit 1 keeps the key in one
// bucket, so that every reply is exact.
func TestHotKeyPipelineKeepsItsOrderAcrossCosts(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		cfg.Decider = newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotKeys: []string{"hot:*"}, HotSplit: 1})
		conn := dialRaw(t, serveConfig(t, cfg))
		key := "hot:" + t.Name()
		const capacity, takes = 100, 16
		var cmds [][]string
		for range takes {
			cmds = append(cmds,
				[]string{"THROTTLE", key, fmt.Sprint(capacity), "1", "1h"},
				[]string{"THROTTLE", key, fmt.Sprint(capacity), "1", "1h", "0"})
		}
		conn.send(cmds...)
		for i := range cmds {
			got := conn.read()
			want := fmt.Sprintf("*5\r\n:0\r\n:%d\r\n:%d\r\n:-1\r\n:", capacity, capacity-1-i/2)
			if len(got) < len(want) || got[:len(want)] != want {
				t.Fatalf("%v (call %d of the pipeline): got %q, want remaining %d", cmds[i], i+1, got, capacity-1-i/2)
			}
		}
	})
}
