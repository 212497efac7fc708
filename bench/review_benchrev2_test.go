package main

import (
	"strings"
	"testing"
)

// The 1.6x aim compares sluice's CPU per decision with redis-server's per
// PING under the same load. The -P 16 row was held against unpipelined
// PINGs, which cost a server about 12 times what pipelined ones do (15.0
// against 1.25 µs on one node, 50 clients): sluice's 2.1 µs a pipelined
// decision read as 0.43x, "met", where PINGs at -P 16 make it 5x.
func TestPipelinedRowUsesPipelinedPingFloor(t *testing.T) {
	const addr = "127.0.0.1:7000"
	run := func(sluice, servers float64) neutralRun {
		return neutralRun{requests: 100000, res: benchCSV{rps: 1000, p50: 0.1, p99: 0.2},
			cost: runCost{sluice: sluice, servers: servers, node: map[string]float64{addr: servers}}}
	}
	row := func(name string, pipe int, sluice float64) *neutralRow {
		return &neutralRow{name: name, clients: 50, pipe: pipe, d: run(0, 20), s: run(sluice, 10)}
	}
	rows := []*neutralRow{row("unpipelined", 1, 7), row("pipelined", 16, 2.1), row("hot", 1, 6), row("one client", 1, 80)}
	pings := map[int]neutralRun{1: run(0, 4.8), 16: run(0, 0.4)}
	var b strings.Builder
	printNeutral(&b, rows, pings, addr, 6)
	seen := 0
	for line := range strings.SplitSeq(b.String(), "\n") {
		if !strings.HasPrefix(line, "sluice CPU per decision") {
			continue
		}
		seen++
		f := strings.Fields(line)
		verdict := strings.Join(f[len(f)-2:], " ")
		switch {
		case strings.Contains(line, "pipelined  ") && !strings.Contains(line, "unpipelined"):
			if !strings.Contains(line, "5.250x") || verdict != "NOT met" {
				t.Errorf("-P 16 row against PING at -P 16: %q, want 5.250x NOT met", line)
			}
		case strings.Contains(line, "unpipelined"):
			if !strings.Contains(line, "1.458x") || !strings.HasSuffix(line, " met") || strings.HasSuffix(line, "NOT met") {
				t.Errorf("unpipelined row against unpipelined PING: %q, want 1.458x met", line)
			}
		}
	}
	if seen != 3 {
		t.Errorf("%d aim lines of sluice's CPU, want 3:\n%s", seen, b.String())
	}
	if !strings.Contains(b.String(), "PING_MBULK -P 16") {
		t.Errorf("the pipelined PING floor is not printed:\n%s", b.String())
	}
}
