package router_test

import (
	"testing"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// sluice serves once WaitConnected returns: a restarted instance must not
// then answer its clients' ordinary commands TRYAGAIN (no command table)
// until its background loop's next tick, when the cluster answered.
func TestWaitConnectedHasTheCommandTable(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{})
	waitConnected(t, r)
	if r.Commands() == nil {
		t.Fatal("connected, but the cluster's command table is not read")
	}
}
