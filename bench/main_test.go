package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCompareUsesMedians(t *testing.T) {
	rs := []result{
		{Target: "sluice", Round: 1, OpsPerSec: 100, ProxyCPU: 10, PrimariesCPU: 5},
		{Target: "direct", Round: 1, OpsPerSec: 200, PrimariesCPU: 30},
		{Target: "sluice", Round: 2, OpsPerSec: 5000, ProxyCPU: 12, PrimariesCPU: 5}, // an outlier
		{Target: "direct", Round: 2, OpsPerSec: 210, PrimariesCPU: 31},
		{Target: "sluice", Round: 3, OpsPerSec: 180, ProxyCPU: 11, PrimariesCPU: 6},
		{Target: "direct", Round: 3, OpsPerSec: 190, PrimariesCPU: 29},
	}
	c := compareRuns(rs, "sluice", "direct")
	if c.OpsA != 180 || c.OpsB != 200 || math.Abs(c.OpsRatio-0.9) > 1e-9 {
		t.Fatalf("got %v/%v = %v, want 180/200 = 0.9", c.OpsA, c.OpsB, c.OpsRatio)
	}
	if math.Abs(c.DecideCPURatioA-16.0/30) > 1e-9 {
		t.Fatalf("CPU ratio %v, want (11+5)/30", c.DecideCPURatioA)
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if !math.IsNaN(median(nil)) || !math.IsNaN(ratio(1, 0)) {
		t.Error("no data must not look like a figure")
	}
}

func TestParseKeys(t *testing.T) {
	for _, s := range []string{"uniform:100000", "zipf:1.1:1000", "hot:1"} {
		if _, err := parseKeys(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"uniform", "uniform:0", "zipf:1:10", "zipf:2", "gauss:5"} {
		if _, err := parseKeys(s); err == nil {
			t.Errorf("%s: accepted", s)
		}
	}
	ks, _ := parseKeys("zipf:1.5:1000")
	src := ks.source(ks.names(), 1)
	counts := map[string]int{}
	for range 10000 {
		counts[src.next()]++
	}
	if len(counts) < 10 || len(counts) > 1000 {
		t.Fatalf("zipf drew %d distinct keys", len(counts))
	}
}

func TestEmbeddedRunAndReport(t *testing.T) {
	cfg, err := parseFlags([]string{"-target", "embedded", "-clients", "4", "-requests", "400", "-keys", "hot:1",
		"-capacity", "10", "-refill", "1", "-period", "1h"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := newTarget("embedded", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.close()
	r, err := runOnce(cfg, tg, cfg.keys.names(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 400 || r.Allowed != 10 || r.Limited != 390 || r.Errors != 0 {
		t.Fatalf("got %d ops, %d allowed, %d limited, %d errors; want 400, 10, 390, 0", r.Ops, r.Allowed, r.Limited, r.Errors)
	}
	if r.Accuracy < 0.99 || r.Accuracy > 1.01 || r.P50 == 0 || r.P99 < r.P50 {
		t.Fatalf("accuracy %v, p50 %d, p99 %d", r.Accuracy, r.P50, r.P99)
	}
	path := filepath.Join(t.TempDir(), "r.html")
	if err := writeReport(path, []result{r}); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(path)
	if !strings.Contains(string(page), "<polyline") || !strings.Contains(string(page), "embedded") {
		t.Fatal("report has no plot of the run")
	}
}

func TestSpreadOfAHotKey(t *testing.T) {
	before := map[string]shardStat{"a": {cpu: 1, steps: 100}, "b": {cpu: 2, steps: 0}, "c": {cpu: 3, steps: 50}}
	after := map[string]shardStat{"a": {cpu: 1.5, steps: 400}, "b": {cpu: 2.2, steps: 300}, "c": {cpu: 3.1, steps: 450}}
	sp := spreadOf(before, after, 1000)
	if want := []int64{400, 300, 300}; !slices.Equal(sp.Steps, want) {
		t.Fatalf("steps %v, want %v (busiest first)", sp.Steps, want)
	}
	if math.Abs(sp.Busiest-0.4) > 1e-9 {
		t.Fatalf("busiest share %v, want 400/1000", sp.Busiest)
	}
	// The busiest CPU is a's 0.5s for 1000 decisions: a core lasts 2000/s.
	if math.Abs(sp.Ceiling-2000) > 1e-6 {
		t.Fatalf("ceiling %v, want 2000/s", sp.Ceiling)
	}
	if got := commandCalls("calls=1234,usec=5,usec_per_call=0.00,rejected_calls=0,failed_calls=0"); got != 1234 {
		t.Fatalf("calls %d, want 1234", got)
	}
}
