package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A WATCH of a migrated key whose client ends its watch (UNWATCH, DISCARD,
// RESET, going away) before the source's ASK is in: the connection to
// the importing node that the ASK then makes, holding the WATCH, is let
// go too, not left open for ever.
func TestWatchAskedAfterItsEndLeavesNoConnection(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	k := "{walk}k"
	if _, err := primaryOf(t, c, k).Do(ctx, "SET", k, "0").ToString(); err != nil {
		t.Fatal(err)
	}
	_, to := migrateKey(t, c, k, true)
	watching := func() int {
		list, err := to.Do(ctx, "CLIENT", "LIST").ToString()
		if err != nil {
			t.Fatal(err)
		}
		return len(clientIDs(list, "watch"))
	}
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		for _, end := range [][][]string{
			{{"UNWATCH"}},
			{{"MULTI"}, {"DISCARD"}},
			{{"RESET"}},
			nil, // the client goes away
		} {
			conn := dialRaw(t, addr)
			conn.send(append([][]string{{"WATCH", k}}, end...)...)
			if end == nil {
				conn.c.Close()
			} else {
				for range len(end) + 1 {
					conn.read()
				}
			}
			what := fmt.Sprintf("loops %d, WATCH then %v", loops, end)
			waitUntil(t, what+": no connection left watching on the importing node", func() bool { return watching() == 0 })
		}
	}
}

// A client watching a migrated key on the importing node switches its
// protocol (HELLO 3): the replies of its commands that follow the watch
// there, and its transaction's, come in the protocol it chose, as the
// node's own would.
func TestWatchAskedThenHelloSwitchesTheImportingNodesReplies(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	k := "{wahello}absent"
	migrateKey(t, c, k, false)
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		// The key is on neither node: the source, migrating, answers ASK.
		if got := conn.do("WATCH", k); got != "+OK\r\n" {
			t.Fatalf("loops %d: WATCH: %q", loops, got)
		}
		if got := conn.do("HELLO", "3"); !strings.HasPrefix(got, "%") {
			t.Fatalf("loops %d: HELLO 3: %q", loops, got)
		}
		if got := conn.do("GET", k); got != "_\r\n" {
			t.Errorf("loops %d: GET of the absent watched key after HELLO 3: %q, want RESP3's null", loops, got)
		}
		conn.send([]string{"MULTI"}, []string{"GET", k}, []string{"EXEC"})
		conn.read()
		conn.read()
		// The watch may be lost (sluice's, in the old protocol): EXEC is
		// then null, and the client's next try runs.
		if got := conn.read(); got != "*1\r\n_\r\n" && got != "_\r\n" {
			t.Errorf("loops %d: EXEC of a GET of the absent watched key after HELLO 3: %q, want it run or null, in RESP3", loops, got)
		}
		conn.send([]string{"WATCH", k}, []string{"MULTI"}, []string{"GET", k}, []string{"EXEC"})
		for range 3 {
			conn.read()
		}
		if got := conn.read(); got != "*1\r\n_\r\n" {
			t.Errorf("loops %d: EXEC of a GET of the absent watched key, watched again after HELLO 3: %q, want RESP3's null in it", loops, got)
		}
	}
}

// A client watching a migrated key on the importing node watches it again
// once the migration ended and sluice's slot map has the importing node
// as the slot's owner: the WATCH is answered OK, as a node answers it
// (not CROSSSLOT, for a single key), and it watches there, where the
// transaction runs: another client's write between WATCH and EXEC aborts
// it.
func TestWatchAskedAgainAfterTheMigrationEnded(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		k := fmt.Sprintf("{waend%d}k", -loops)
		sl := slot.Of(k)
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		conn, other := dialRaw(t, addr), dialRaw(t, addr)
		conn.do("SET", k, "0")
		_, to := migrateKey(t, c, k, true)
		if got := conn.do("WATCH", k); got != "+OK\r\n" {
			t.Fatalf("loops %d: WATCH: %q", loops, got)
		}
		if err := c.MoveSlot(ctx, sl, to); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "sluice's slot map has the migration's end", func() bool {
			fs := []router.Forward{{Slot: sl}}
			r.Route(fs)
			return fs[0].Addr == to.Addr
		})
		if got := conn.do("WATCH", k); got != "+OK\r\n" {
			t.Errorf("loops %d: WATCH of the watched key again after the migration: %q", loops, got)
		}
		if got := other.do("INCR", k); got != ":1\r\n" {
			t.Fatalf("loops %d: another client's INCR: %q", loops, got)
		}
		conn.send([]string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"})
		conn.read()
		conn.read()
		if got := conn.read(); got != "*-1\r\n" {
			t.Errorf("loops %d: EXEC after another client wrote the watched key: %q, want null", loops, got)
		}
		conn.send([]string{"WATCH", k}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"})
		for range 3 {
			conn.read()
		}
		if got := conn.read(); got != "*1\r\n:2\r\n" {
			t.Errorf("loops %d: EXEC of a new watch: %q, want it run", loops, got)
		}
	}
}
