package router

import (
	"testing"
	"time"
)

// A replica that failed a read is passed over for replicaRest, no longer;
// its entry must not outlive that, or every replica address that ever
// failed a read (a pod restarted at a new address, each time) stays in
// the map for as long as sluice runs.
func TestReviewLeakReplicaDownForgotten(t *testing.T) {
	c := &Cluster{}
	const old, recent = "10.0.0.9:6379", "10.0.0.8:6379"
	c.replicaDown.Store(old, time.Now().Add(-2*replicaRest).UnixNano())
	c.replicaDown.Store(recent, time.Now().UnixNano())
	c.dropGone(&topology{replicas: map[string][]string{}})
	if _, ok := c.replicaDown.Load(old); ok {
		t.Errorf("replicaDown still holds %s, whose rest ended", old)
	}
	if _, ok := c.replicaDown.Load(recent); !ok {
		t.Errorf("replicaDown lost %s, still resting", recent)
	}
}
