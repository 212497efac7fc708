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
		waitRouter(t, r)
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

// With --read-from-replicas, a read of a client whose watch was lost with
// its connection (the client's commands then go where their keys are, as
// without a watch) goes to a replica on a connection that sent READONLY:
// it went on one that had not, which the replica answered MOVED, and the
// read was sent again to the primary. Both serving paths.
func TestReviewScanroReadAfterALostWatchOnAReplica(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	ctx := context.Background()
	info := func(n *clustertest.Node, section, field string) int {
		s, _ := n.Do(ctx, "INFO", section).ToString()
		_, after, ok := strings.Cut(s, field)
		if !ok {
			return 0
		}
		v, _ := strconv.Atoi(after[:strings.IndexAny(after, ",\r")])
		return v
	}
	const key = "{scanroro}k"
	primary := primaryOf(t, c, key)
	var replica *clustertest.Node
	for _, n := range c.Nodes[3:] {
		s, _ := n.Do(ctx, "INFO", "replication").ToString()
		if _, port, _ := strings.Cut(primary.Addr, ":"); strings.Contains(s, "master_port:"+port+"\r\n") {
			replica = n
		}
	}
	// Before the routers read the slot map: CLUSTER SLOTS leaves out a
	// replica that has replicated nothing yet.
	if err := primary.Do(ctx, "SET", key, "v").Error(); err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(replica.Addr, ":")
	waitUntil(t, "every node's slot map has the replica", func() bool {
		for _, n := range c.Nodes {
			if s, _ := nodeDo(n, "CLUSTER", "SLOTS"); !strings.Contains(s, ":"+port+"\r\n") {
				return false
			}
		}
		return true
	})
	conns := map[int]*rawConn{}
	for _, loops := range []int{1, -1} {
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true, HotThreshold: -1})
		waitRouter(t, r)
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		before := info(replica, "commandstats", "cmdstat_get:calls=")
		waitUntil(t, "a GET reaches the replica, which has the write", func() bool {
			return conn.do("GET", key) == "$1\r\nv\r\n" && info(replica, "commandstats", "cmdstat_get:calls=") > before
		})
		if got := conn.do("WATCH", key); got != "+OK\r\n" {
			t.Fatalf("WATCH: %q", got)
		}
		list, _ := primary.Do(ctx, "CLIENT", "LIST").ToString()
		var id string
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, " cmd=watch ") {
				id, _, _ = strings.Cut(strings.TrimPrefix(line, "id="), " ")
			}
		}
		if err := primary.Do(ctx, "CLIENT", "KILL", "ID", id).Error(); err != nil {
			t.Fatalf("CLIENT KILL ID %q: %v", id, err)
		}
		// Until sluice has seen the connection end: a GET sent on it
		// before then is answered its error.
		waitUntil(t, "a GET is answered after the watch's connection ended", func() bool {
			return conn.do("GET", key) == "$1\r\nv\r\n"
		})
		moved := info(replica, "errorstats", "errorstat_MOVED:count=")
		if got := conn.do("GET", key); got != "$1\r\nv\r\n" {
			t.Errorf("loops %d: GET after the watch was lost: %q", loops, got)
		}
		if n := info(replica, "errorstats", "errorstat_MOVED:count=") - moved; n != 0 {
			t.Errorf("loops %d: the replica answered MOVED to %d GET after the watch was lost", loops, n)
		}
		conns[loops] = conn
	}
	// And one its replica cannot answer goes to the primary, as any
	// other client's does: it was answered the refused connection.
	replica.Kill()
	for loops, conn := range conns {
		if got := conn.do("GET", key); got != "$1\r\nv\r\n" {
			t.Errorf("loops %d: GET after the watch was lost, its replica dead: %q", loops, got)
		}
	}
}
