package proxy_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A SCAN pipelined behind a write, read once sluice's slot map has moved
// the write's slot, sees the key written: the write, routed by the older
// map, is redirected to the slot's new owner, and the SCAN of that
// primary must not get there first (on the loops it did: a SCAN part was
// not routed by the map whose generation is checked, as DBSIZE's and
// KEYS's are). The old owner sleeps (DEBUG SLEEP) so that the write is
// still in flight when sluice reads the new map. Both serving paths.
func TestReviewScanroScanAfterAWriteAcrossASlotMove(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ctx := context.Background()
	primaries := c.Nodes[:3]
	other := func(not ...*clustertest.Node) *clustertest.Node {
		for _, n := range primaries {
			if !slices.Contains(not, n) {
				return n
			}
		}
		t.Fatal("no primary left")
		return nil
	}
	for _, loops := range []int{1, -1} {
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: 100 * time.Millisecond, HotThreshold: -1,
			TopologyInterval: time.Hour})
		waitUntil(t, "the router reads the cluster's command table", func() bool { return r.Commands() != nil })
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		tag := "{scanro" + strconv.Itoa(loops+1) + "}"
		key := tag + "k"
		from := primaryOf(t, c, key)
		to := other(from)
		// A slot of another primary than from's, moved too: its MOVED
		// tells sluice to read the slot map while from sleeps.
		var sign string
		for i := 0; sign == "" && i < 100; i++ {
			if k := "{scanrosign" + strconv.Itoa(loops+1) + "-" + strconv.Itoa(i) + "}"; primaryOf(t, c, k) != from {
				sign = k
			}
		}
		conn, signer := dialRaw(t, addr), dialRaw(t, addr)
		if got := conn.do("DEL", key); got != ":0\r\n" {
			t.Fatalf("DEL: %q", got)
		}
		if err := c.MoveSlot(ctx, slot.Of(key), to); err != nil {
			t.Fatal(err)
		}
		if err := c.MoveSlot(ctx, slot.Of(sign), other(from, primaryOf(t, c, sign))); err != nil {
			t.Fatal(err)
		}
		sleeper, err := net.Dial("tcp", from.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sleeper.Close() })
		if _, err := sleeper.Write(router.AppendCommand(nil, [][]byte{[]byte("DEBUG"), []byte("SLEEP"), []byte("0.3")})); err != nil {
			t.Fatal(err)
		}
		conn.send([]string{"SET", key, "v"})
		if got := signer.do("GET", sign); got != "$-1\r\n" {
			t.Fatalf("GET: %q", got)
		}
		waitUntil(t, "sluice's slot map has the move", func() bool {
			routed := []router.Forward{{Slot: slot.Of(key)}}
			r.Route(routed)
			return routed[0].Addr == to.Addr
		})
		cursor := -1
		for i, sl := range r.Primaries() {
			routed := []router.Forward{{Slot: sl}}
			r.Route(routed)
			if routed[0].Addr == to.Addr {
				cursor = i
			}
		}
		conn.send([]string{"SCAN", strconv.Itoa(cursor), "MATCH", tag + "*", "COUNT", "1000"})
		if got := conn.read(); got != "+OK\r\n" {
			t.Errorf("loops %d: SET: %q", loops, got)
		}
		if got := conn.read(); !strings.Contains(got, key) {
			t.Errorf("loops %d: SCAN of the key's new primary, pipelined behind its SET: %q, without %s", loops, got, key)
		}
	}
}
