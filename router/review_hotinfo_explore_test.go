package router_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

func TestExploreHotInfo2(t *testing.T) {
	c, _, _ := hotCluster(t, clustertest.Config{Replicas: -1})
	a := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: -1, HotKeys: []string{"d:*"}, HotCooldown: 300 * time.Millisecond})
	b := newRouter(t, c.Addrs(), router.ClusterConfig{HotThreshold: 300, HotCooldown: 300 * time.Millisecond})
	waitConnected(t, a)
	waitConnected(t, b)
	iv := interval(t, 1000, 1000, 1_000_000)
	start := time.Now()
	for i := range 20 {
		for j := 0; j <= i; j++ {
			decide(a, fmt.Sprintf("d:%d", i), iv)
		}
	}
	for i := 0; i < 100; i++ {
		st := stats(a)
		t.Logf("%6dms A:%d %d %+v", time.Since(start).Milliseconds(), st.HotKeys, len(st.Hot), st.Hot[:min(3, len(st.Hot))])
		for j := range 5 {
			decide(b, fmt.Sprintf("d:%d", j), iv)
		}
		sb := stats(b)
		t.Logf("B:%d %+v", sb.HotKeys, sb.Hot[:min(3, len(sb.Hot))])
		if st.HotKeys == 0 && sb.HotKeys == 0 {
			break
		}
		time.Sleep(30 * time.Millisecond)
	}
}
