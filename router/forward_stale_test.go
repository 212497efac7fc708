package router

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A forwarded command whose node cannot be reached marks the slot map as
// behind, as a bucket call's fault does: passthrough alone has no other
// sign of a failover, and the promoted replica was used only at the next
// periodic read, up to a second after the promotion. The probe interval is
// an hour here, so that the background loop does not read the map (and
// clear the mark) while the test looks.
func TestForwardFailureMarksTheSlotMapBehind(t *testing.T) {
	tc := clustertest.New(t, clustertest.Config{Replicas: -1})
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: tc.Addrs(), ProbeInterval: time.Hour, ForwardTimeout: time.Second})
	const key = "stale"
	n, err := tc.Primary(ctx, slot.Of(key))
	if err != nil {
		t.Fatal(err)
	}
	get := func() string {
		replies := make([][]byte, 1)
		got := make(chan struct{})
		c.Forward(context.Background(), nil, []Forward{{Slot: slot.Of(key), Cmd: AppendCommand(nil, [][]byte{[]byte("GET"), []byte(key)})}},
			replies, func([]int) { close(got) })
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			t.Fatal("GET: no reply in 30s")
		}
		return string(replies[0])
	}
	if got := get(); got != "$-1\r\n" {
		t.Fatalf("GET before the kill: %q", got)
	}
	if c.stale.Load() {
		t.Fatal("the slot map is marked behind before any failure")
	}
	n.Kill()
	// ERR when the GET met the connection as it broke, CLUSTERDOWN when
	// it met a new one refused.
	if got := get(); !strings.HasPrefix(got, "-ERR sluice: connection to "+n.Addr) && !strings.HasPrefix(got, "-CLUSTERDOWN sluice: connection to "+n.Addr) {
		t.Fatalf("GET after the kill: %q, want the connection's error", got)
	}
	if !c.stale.Load() {
		t.Error("a forwarded command's failed connection left the slot map unmarked")
	}
}
