package router_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A hung shard's error, in its log line and INFO, says what happened in
// an operator's words, whichever path met it: not Go's "context deadline
// exceeded".
func TestHungShardErrorSaysNoReply(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	victim := c.Nodes[0]
	var key string
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if n, err := c.Primary(ctx, slot.Of(router.KeyPrefix+k)); err != nil {
			t.Fatal(err)
		} else if n == victim {
			key = k
		}
	}
	r := newRouter(t, c.Addrs(), router.ClusterConfig{Timeout: 100 * time.Millisecond, HotThreshold: -1})
	waitConnected(t, r)
	iv := interval(t, 10, 1, 1_000_000)
	decide(r, key, iv)
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	decide(r, key, iv)
	st := shardStats(t, r, victim.Addr)
	if st.Healthy || !strings.Contains(st.LastError, "no reply within") {
		t.Fatalf("paused shard: %+v, want unhealthy, its last error naming no reply within the timeout", st)
	}
}
