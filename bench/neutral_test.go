package main

import (
	"math"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Verbatim redis-benchmark 7.0 output, --cluster first: it lists the
// primaries before the CSV.
const clusterCSV = `Cluster has 3 master nodes:

Master 0: caface04b6254ce355402f84a976fa18a6f86b32 127.0.0.1:7000
Master 1: 4abe2c18d6a39c46346556b4ad26937de3dea7b4 127.0.0.1:7002
Master 2: 247dcdb9d8602e265d9d3cd89e88cc6938c1bc0e 127.0.0.1:7001

"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"EVALSHA dd81bc7d6860ca0bf66bff6d4845ce7563c2475a 1 rate:{tag}:p:__rand_int__ 100 10 1 1796320847","149551.34","4.669","0.232","4.223","9.055","11.623","18.735"
`

const pingCSV = `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"PING_MBULK","130208.34","0.240","0.048","0.191","0.311","1.431","36.575"
`

func TestParseBenchCSV(t *testing.T) {
	got, err := parseBenchCSV(clusterCSV)
	if want := (benchCSV{rps: 149551.34, p50: 4.223, p99: 11.623}); got != want || err != nil {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	got, err = parseBenchCSV(pingCSV)
	if want := (benchCSV{rps: 130208.34, p50: 0.191, p99: 1.431}); got != want || err != nil {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	header, row, _ := strings.Cut(pingCSV, "\n")
	for name, out := range map[string]string{
		"no output": "",
		// What redis-benchmark prints when the server errs: the header only.
		"no result":    header + "\n",
		"two results":  pingCSV + row,
		"bad number":   strings.Replace(pingCSV, "0.311", "fast", 1),
		"other fields": strings.Replace(pingCSV, "p95_latency_ms", "p90_latency_ms", 1),
		"short row":    header + "\n\"PING_MBULK\",\"1\"\n",
	} {
		if got, err := parseBenchCSV(out); err == nil {
			t.Errorf("%s: accepted as %+v", name, got)
		}
	}
}

// processCPU reads a process's CPU clock to the µs: it agrees with
// getrusage's count for this process, where /proc's ticks are 10 ms.
func TestProcessCPU(t *testing.T) {
	rusage := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ruBefore := rusage()
	x := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		for i := range 1_000_000 {
			x += i
		}
		if cpu, _ := processCPU(os.Getpid()); cpu-before >= 30*time.Millisecond {
			break
		}
	}
	after, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ran, ruRan := after-before, rusage()-ruBefore
	if ran < 30*time.Millisecond || (ran-ruRan).Abs() > 5*time.Millisecond {
		t.Errorf("processCPU counted %v where getrusage counted %v (%d)", ran, ruRan, x)
	}
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := processCPU(ended.Process.Pid); err == nil {
		t.Error("the CPU clock of a process that has ended: no error")
	}
}

func TestParseClusterNodes(t *testing.T) {
	text := `f625e96867ed0945780ae2773779c2a974ac0ab5 127.0.0.1:7003@17003 slave caface04b6254ce355402f84a976fa18a6f86b32 0 1796320805026 1 connected
caface04b6254ce355402f84a976fa18a6f86b32 127.0.0.1:7000@17000 myself,master - 0 1796320804000 1 connected 0-5460
4abe2c18d6a39c46346556b4ad26937de3dea7b4 127.0.0.1:7002@17002,redis-2 master - 0 1796320805026 3 connected 10923-16382 16383 [16383->-247dcdb9d8602e265d9d3cd89e88cc6938c1bc0e]
247dcdb9d8602e265d9d3cd89e88cc6938c1bc0e 127.0.0.1:7001@17001 master - 0 1796320805026 2 connected 5461-10922
`
	nodes, err := parseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 4 || nodes[0].addr != "127.0.0.1:7003" || nodes[0].primary || len(nodes[0].slots) != 0 {
		t.Fatalf("replica read as %+v", nodes[0])
	}
	if !nodes[1].primary || nodes[2].addr != "127.0.0.1:7002" || len(nodes[2].slots) != 2 {
		t.Fatalf("primaries read as %+v, %+v", nodes[1], nodes[2])
	}
	for slot, want := range map[int]string{0: "127.0.0.1:7000", 5460: "127.0.0.1:7000", 5461: "127.0.0.1:7001", 16383: "127.0.0.1:7002"} {
		if got, err := slotOwner(nodes, slot); got != want || err != nil {
			t.Errorf("slot %d: %s, %v; want %s", slot, got, err, want)
		}
	}
	if _, err := slotOwner(nodes[:1], 0); err == nil {
		t.Error("a replica owned a slot")
	}
	if _, err := parseClusterNodes("abc 127.0.0.1:7000@17000 master - 0 0 1 connected 0-x"); err == nil {
		t.Error("bad slot range accepted")
	}
}

func TestCostPerRequest(t *testing.T) {
	before := usage{sluiceCPU: time.Second, nodeCPU: map[string]float64{"a": 1.0, "b": 2.0}}
	after := usage{sluiceCPU: 2500 * time.Millisecond, nodeCPU: map[string]float64{"a": 1.5, "b": 2.2}}
	c := costPerRequest(before, after, 100000)
	// 1.5 s for 100,000 requests.
	if math.Abs(c.sluice-15) > 1e-9 {
		t.Errorf("sluice %v µs, want 15", c.sluice)
	}
	if math.Abs(c.servers-7) > 1e-9 || math.Abs(c.node["a"]-5) > 1e-9 || math.Abs(c.node["b"]-2) > 1e-9 {
		t.Errorf("servers %v µs (%v), want 7 (a 5, b 2)", c.servers, c.node)
	}
}

func TestServedNote(t *testing.T) {
	for _, tt := range []struct {
		served, requests int64
		ok               bool
	}{
		{100000, 100000, true},
		{100004, 100000, true}, // sluice's heartbeat, a script a second
		{99999, 100000, false},
		{102000, 100000, false},
	} {
		if note := servedNote(tt.served, tt.requests); (note == "") != tt.ok {
			t.Errorf("%d served of %d: note %q", tt.served, tt.requests, note)
		}
	}
}

func TestRunSizing(t *testing.T) {
	// At 60,000/s and 20,000/s, n at the pair's rate for 3 s takes 1.5 s
	// and 4.5 s: 6 s together.
	rate := pairRate(60000, 20000)
	n := sizeRequests(rate, 3*time.Second, 1000)
	if n != 90000 {
		t.Fatalf("n %d, want 90000", n)
	}
	if got := sizeRequests(100, time.Second, 2000); got != 2000 {
		t.Fatalf("n %d below the floor 2000", got)
	}
}

func TestNeutralFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-neutral", "-sluice-pid", "42", "-addr", "127.0.0.1:6399", "-cluster", "127.0.0.1:7000"}, os.Stderr)
	if err != nil || !cfg.neutral || cfg.sluicePID != 42 {
		t.Fatalf("got %+v, %v", cfg, err)
	}
	if !strings.Contains(articleScript, "HMGET") {
		t.Fatal("article.lua is not embedded")
	}
}
