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

// A threshold under one decision a second is a threshold, not "off".
func TestInfoHotThresholdFraction(t *testing.T) {
	var b strings.Builder
	writeStats(&b, router.Stats{Cluster: &router.ClusterStats{HotThreshold: 0.4}})
	if got := b.String(); !strings.Contains(got, "\r\nhot_threshold:0.4\r\n") {
		t.Fatalf("a threshold of 0.4: %q, want hot_threshold:0.4", got)
	}
}
