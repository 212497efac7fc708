package main

import (
	"strings"
	"testing"
)

// redis-benchmark --cluster counts an error reply as a request served and
// exits 0, and the servers count a failed call among their calls: a run of
// a script that failed on every call (the article's script without its
// `now`) gave 41,667 req/s and no note. Counters as redis-server 7.0 keeps
// them after such a run.
func TestClusterRunWithFailedCallsGivesNoFigure(t *testing.T) {
	before := `cmdstat_evalsha:calls=500,usec=5000,usec_per_call=10.00,rejected_calls=0,failed_calls=0`
	after := `cmdstat_evalsha:calls=1000,usec=5600,usec_per_call=5.60,rejected_calls=2,failed_calls=498`
	if got := commandFailed(after); got != 500 {
		t.Fatalf("failed %d, want 498 failed + 2 rejected", got)
	}
	b, a := usage{failed: commandFailed(before)}, usage{failed: commandFailed(after)}
	cluster := []string{"--cluster", "-h", "127.0.0.1", "-p", "7000", "EVALSHA", "sha", "1", "rate:{tag}:k", "100", "10", "1"}
	err := clusterFailures(cluster, b, a)
	if err == nil || !strings.Contains(err.Error(), "failed 500 calls") {
		t.Fatalf("got %v, want the run failed for 500 failed calls", err)
	}
	if err := clusterFailures(cluster, b, b); err != nil {
		t.Fatalf("a run without failed calls: %v", err)
	}
	// sluice's heartbeat, meeting NOSCRIPT on a node that lost its scripts.
	if err := clusterFailures(cluster, b, usage{failed: b.failed + 1}); err != nil {
		t.Fatalf("a run with sluice's one NOSCRIPT: %v", err)
	}
	// Without --cluster, redis-benchmark exits at the first error itself,
	// and the calls failing at the servers are sluice's, which it retries
	// (NOSCRIPT after a failover).
	if err := clusterFailures(cluster[1:], b, a); err != nil {
		t.Fatalf("a run through sluice: %v", err)
	}
}

// redis-benchmark 7.0 --cluster, 50 clients, -r 1000 on three primaries,
// made 1,000 keys on each (`rate:{06S}:…` on one, a tag of each node's
// own), 3,000 in all, where -r 1000 through sluice makes 1,000: the row
// "50 clients, 100000 keys" ran the direct path on 300,000. One client
// uses one primary, two use two.
func TestClusterRunUsesTheSameKeys(t *testing.T) {
	for _, tc := range []struct{ keys, clients, primaries, want int }{
		{100000, 50, 3, 33334},
		{100000, 1, 3, 100000},
		{100000, 2, 3, 50000},
		{1000, 50, 1, 1000},
	} {
		if got := clusterKeys(tc.keys, tc.clients, tc.primaries); got != tc.want {
			t.Errorf("%+v: -r %d, want %d", tc, got, tc.want)
		}
	}
}
