package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/router"
)

// On the embedded backend there are no nodes: CLIENT TRACKING's answers
// name none (its refusal once gave the cluster's reason, "the nodes would
// track keys for sluice's connections", to a user who has none).
func TestEmbeddedTrackingNamesNoNodes(t *testing.T) {
	conn := dialRaw(t, serve(t, router.NewMemory(0)))
	for _, opt := range []string{"BCAST", "REDIRECT"} {
		args := []string{"CLIENT", "TRACKING", "ON", opt}
		if opt == "REDIRECT" {
			args = append(args, strings.TrimSuffix(strings.TrimPrefix(conn.do("CLIENT", "ID"), ":"), "\r\n"))
		}
		got := conn.do(args...)
		if !strings.HasPrefix(got, "-ERR sluice does not support CLIENT TRACKING ON with "+opt) ||
			strings.Contains(got, "node") || strings.Contains(got, "cluster") {
			t.Errorf("%q on the embedded backend: %q, want it refused without naming nodes", args, got)
		}
	}
	if got := conn.do("CLIENT", "TRACKING", "ON"); got != "+OK\r\n" {
		t.Errorf("CLIENT TRACKING ON on the embedded backend: %q", got)
	}
}

// A period that parses but is not whole µs, or is too long to count in
// µs, was answered the same "must be a positive duration like 60, 500ms
// or 1h" as a word that is no period at all, so a caller could not tell
// what to change.
func TestThrottlePeriodErrorsSayWhatIsWrong(t *testing.T) {
	conn := dialRaw(t, serve(t, router.NewMemory(0)))
	for _, tc := range []struct{ period, want string }{
		{"1.0000001s", "-ERR period must be a whole number of microseconds\r\n"},
		{"0.0000005", "-ERR period must be a whole number of microseconds\r\n"},
		{"99999999999999999999d", "-ERR period is too long to count in microseconds\r\n"},
		{"9223372036854775807", "-ERR period is too long to count in microseconds\r\n"},
		{"999999999999999999d", "-ERR period is too long to count in microseconds\r\n"},
		{"1w", "-ERR period must be a positive duration like 60, 500ms or 1h\r\n"},
		{"-1s", "-ERR period must be a positive duration like 60, 500ms or 1h\r\n"},
		{"0", "-ERR period must be a positive duration like 60, 500ms or 1h\r\n"},
		{"0.5ms", "-ERR period must be at least 1ms\r\n"},
	} {
		if got := conn.do("THROTTLE", "k", "1", "1", tc.period); got != tc.want {
			t.Errorf("THROTTLE k 1 1 %s: %q, want %q", tc.period, got, tc.want)
		}
	}
}
