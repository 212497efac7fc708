package main

import "testing"

// Without --cluster, the start line must not name a fallback policy: the
// line before it says --fallback is ignored, and a new user reading
// "fallback": "open" beside "backend": "embedded" would take it as in
// force.
func TestReviewEmbeddedStartLineNamesNoFallback(t *testing.T) {
	p := launch(t, binary(t), nil, "--listen", "127.0.0.1:0", "--fallback", "open")
	started := p.next(t, "sluice started")
	if started["backend"] != "embedded" || started["listen"] == "" {
		t.Fatalf("start line %v: want backend embedded and the address", started)
	}
	for _, field := range []string{"fallback", "cluster"} {
		if v, ok := started[field]; ok {
			t.Errorf("start line has %s=%v without --cluster: %v", field, v, started)
		}
	}
}
