package proxy

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/router"
)

// --hot-threshold 0 turns detection off, which the router holds as a
// negative threshold: INFO says 0, the value README documents for it,
// not the router's -1.
func TestInfoHotThresholdOffIsZero(t *testing.T) {
	var b strings.Builder
	writeStats(&b, router.Stats{Cluster: &router.ClusterStats{HotThreshold: -1}})
	if got := b.String(); !strings.Contains(got, "\r\nhot_threshold:0\r\n") {
		t.Fatalf("detection off: %q, want hot_threshold:0", got)
	}
}
