package main

import (
	"regexp"
	"strings"
	"testing"
)

// The decisions/s plot is linear from 0: its middle label sat on 0 (the
// log plot's geometric mean, sqrt(0 × hi)), printed over the bottom one.
func TestLinearPlotLabelsItsMiddle(t *testing.T) {
	var b strings.Builder
	lineChart(&b, []string{"a"}, []string{"round 1", "round 2"}, [][]float64{{1000, 3000}}, false)
	var labels []string
	for _, m := range regexp.MustCompile(`text-anchor="end">([^<]*)<`).FindAllStringSubmatch(b.String(), -1) {
		labels = append(labels, m[1])
	}
	if strings.Join(labels, " ") != "0 1500 3000" {
		t.Fatalf("y labels %v, want 0 1500 3000", labels)
	}
}
