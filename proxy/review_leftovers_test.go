package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// Redis takes any number that fits 64 bits for a SCAN cursor; a cursor
// naming no primary (past the last one) answered ERR invalid cursor,
// which a caller's loop takes for a failure, not for a scan's end. It
// ends the scan, and the options are still refused as a node refuses them.
func TestScanCursorPastTheLastPrimaryEnds(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	const done = "*2\r\n$1\r\n0\r\n*0\r\n"
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		conn.do("SET", "scanpast", "v")
		for _, tc := range [][]string{
			{"SCAN", "255"},
			{"SCAN", "3"},
			{"SCAN", "18446744073709551615", "MATCH", "*", "COUNT", "1000"},
			{"SCAN", "-1", "TYPE", "string"},
		} {
			if got := conn.do(tc...); got != done {
				t.Errorf("path %d: %q: %q, want the scan's end %q", loops, tc, got, done)
			}
		}
		want := direct(t, c, -1, "SCAN", "255", "COUNT", "0")
		if want[0] != '-' {
			t.Fatalf("SCAN 255 COUNT 0 on a node: %q: the test has it wrong", want)
		}
		if got := conn.do("SCAN", "255", "COUNT", "0"); got != want {
			t.Errorf("path %d: SCAN 255 COUNT 0: %q, want the node's %q", loops, got, want)
		}
	}
}
