package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// TestTransactionDuringMigration runs transactions through sluice while
// their slot is held half moved (IMPORTING on the target, MIGRATING on
// the source, some keys migrated): each answers what it would with no
// migration going on, or TRYAGAIN where Redis Cluster itself answers it
// (the transaction's keys are split between the two nodes), and never
// ASK. A WATCH of a migrated key watches it on the importing node, where
// a transaction of watched keys runs; a watched transaction whose keys are
// not all on its watching connection's node is aborted (EXEC answers
// null), as one whose watched key changed. Completing the migration afterwards proves that no key was
// written on both nodes (MIGRATE would refuse it), and the values are the
// ones the transactions left.
func TestTransactionDuringMigration(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} { // the loops' pipes, the goroutines' connections
		resp3 := loops == -1 // the watching client's protocol
		tag := "{mig" + strconv.Itoa(-loops) + "}"
		k := func(name string) string { return tag + name }
		sl := slot.Of(tag)
		from, err := c.Primary(ctx, sl)
		if err != nil {
			t.Fatal(err)
		}
		to := otherPrimary(c, from)
		// A key of another primary, where a transaction watched on the
		// slot's runs unwatched (README).
		elsewhere := keyWhere(t, c, "o", "k", func(n *clustertest.Node, _ string) bool { return n != from })
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		conn, other, w := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)
		null := "*-1\r\n"
		if resp3 {
			w.do("HELLO", "3")
			null = "_\r\n"
		}
		for _, kv := range [][2]string{{"moved", "1"}, {"stays", "10"}, {"watched", "5"}} {
			if got := conn.do("SET", k(kv[0]), kv[1]); got != "+OK\r\n" {
				t.Fatalf("SET %s: %q", kv[0], got)
			}
		}
		if _, err := c.StartMove(ctx, sl, to); err != nil {
			t.Fatal(err)
		}
		migrate := func(key string) {
			t.Helper()
			if err := c.Migrate(ctx, from, to, key); err != nil {
				t.Fatal(err)
			}
		}
		migrate(k("moved"))

		for _, step := range []struct {
			what string
			conn *rawConn
			cmds [][]string
			want string // the last command's reply; the others are checked to be no redirect
		}{
			{"on a migrated key", conn, [][]string{{"MULTI"}, {"INCR", k("moved")}, {"GET", k("moved")}, {"EXEC"}}, "*2\r\n:2\r\n$1\r\n2\r\n"},
			{"on a new key", conn, [][]string{{"MULTI"}, {"SET", k("new"), "x"}, {"GET", k("new")}, {"EXEC"}}, "*2\r\n+OK\r\n$1\r\nx\r\n"},
			{"on a key not migrated yet", conn, [][]string{{"MULTI"}, {"INCR", k("stays")}, {"EXEC"}}, "*1\r\n:11\r\n"},
			{"on keys of both nodes", conn, [][]string{{"MULTI"}, {"INCR", k("moved")}, {"INCR", k("stays")}, {"EXEC"}}, "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"},
			{"with one command on keys of both nodes", conn, [][]string{{"MULTI"}, {"MGET", k("stays"), k("moved")}, {"EXEC"}}, "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"},
			{"refused: the migrated key kept", conn, [][]string{{"GET", k("moved")}}, "$1\r\n2\r\n"},
			{"refused: the other kept", conn, [][]string{{"GET", k("stays")}}, "$2\r\n11\r\n"},

			// Watched where it is, on the importing node, and run there.
			{"watching a migrated key", w, [][]string{{"WATCH", k("moved")}, {"MULTI"}, {"INCR", k("moved")}, {"EXEC"}}, "*1\r\n:3\r\n"},
			{"watching a migrated key, pipelined with a transaction on another", w, [][]string{{"WATCH", k("moved")}, {"MULTI"}, {"INCR", k("stays")}, {"EXEC"}}, null},
			{"watching a key not migrated yet", w, [][]string{{"WATCH", k("stays")}, {"GET", k("moved")}, {"MULTI"}, {"INCR", k("stays")}, {"EXEC"}}, "*1\r\n:12\r\n"},
			{"watching a key, on a key of another primary", w, [][]string{{"WATCH", k("stays")}, {"MULTI"}, {"SET", elsewhere, "v"}, {"EXEC"}}, "*1\r\n+OK\r\n"},
			{"after the watched transactions", conn, [][]string{{"MULTI"}, {"INCR", k("moved")}, {"EXEC"}}, "*1\r\n:4\r\n"},
			{"watching a key that another client then changes", w, [][]string{{"WATCH", k("watched")}}, "+OK\r\n"},
		} {
			w := step.conn
			w.send(step.cmds...)
			var got string
			for i := range step.cmds {
				if got = w.read(); strings.HasPrefix(got, "-ASK") || strings.HasPrefix(got, "-MOVED") {
					t.Errorf("loops %d, transaction %s: %q answered %q", loops, step.what, step.cmds[i], got)
				}
			}
			if got != step.want {
				t.Errorf("loops %d, transaction %s: %q, want %q", loops, step.what, got, step.want)
			}
		}
		// The watched key moves while it is watched, and another client
		// changes it on its new node: the transaction must not overwrite
		// that.
		migrate(k("watched"))
		if got := other.do("INCR", k("watched")); got != ":6\r\n" {
			t.Fatalf("loops %d: INCR of the migrated watched key: %q", loops, got)
		}
		w.send([]string{"MULTI"}, []string{"SET", k("watched"), "0"}, []string{"EXEC"})
		for _, want := range []string{"+OK\r\n", "+QUEUED\r\n", null} {
			if got := w.read(); got != want {
				t.Errorf("loops %d, transaction whose watched key moved and changed: %q, want %q", loops, got, want)
			}
		}

		if err := c.MoveSlot(ctx, sl, to); err != nil {
			t.Fatalf("loops %d: completing the migration: %v", loops, err)
		}
		for key, want := range map[string]string{"moved": "4", "stays": "12", "watched": "6", "new": "x"} {
			if got := conn.do("GET", k(key)); got != "$"+strconv.Itoa(len(want))+"\r\n"+want+"\r\n" {
				t.Errorf("loops %d: after the migration, %s is %q, want %q", loops, key, got, want)
			}
		}
	}
}

// A watching client's connection to its node breaks (here the node closes
// it): its watches end with it, so the transaction must not run on a new
// connection. EXEC answers null, or the connection's error if the
// transaction was written before sluice saw it break; never its result.
func TestTransactionWatchingOnALostConnection(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	w := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	k := "{lost}k"
	node := primaryOf(t, c, k)
	w.do("SET", k, "0")
	if got := w.do("WATCH", k); got != "+OK\r\n" {
		t.Fatalf("WATCH: %q", got)
	}
	list, err := node.Do(ctx, "CLIENT", "LIST").ToString()
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if ids := clientIDs(list, "watch"); len(ids) > 0 {
		id = ids[len(ids)-1]
	}
	if id == "" {
		t.Fatalf("no connection on %s watches:\n%s", node.Addr, list)
	}
	if err := node.Do(ctx, "CLIENT", "KILL", "ID", id).Error(); err != nil {
		t.Fatal(err)
	}
	w.send([]string{"MULTI"}, []string{"SET", k, "1"}, []string{"EXEC"})
	w.read()
	w.read()
	if got := w.read(); got != "*-1\r\n" && !strings.HasPrefix(got, "-ERR sluice: connection to") {
		t.Errorf("EXEC after the watching connection broke: %q, want null or the connection's error", got)
	}
	if got := w.do("GET", k); got != "$1\r\n0\r\n" {
		t.Errorf("after the transaction: %q, want the value before it", got)
	}
}

// The commands a client pipelines after the end of a watch (EXEC,
// DISCARD, UNWATCH, RESET, an aborted EXEC) run after those sent on its
// watch's own connection, as on one node: a GET reads what the client
// wrote before it. Both serving paths.
func TestTransactionPipelineAfterWatchKeepsOrder(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		for i, p := range []struct {
			end  [][]string
			want string // GET's reply
		}{
			{[][]string{{"MULTI"}, {"SET", "{o}k", "x"}, {"EXEC"}}, "$1\r\nx\r\n"},
			{[][]string{{"UNWATCH"}}, "$1\r\nv\r\n"},
			{[][]string{{"MULTI"}, {"DISCARD"}}, "$1\r\nv\r\n"},
			{[][]string{{"RESET"}}, "$1\r\nv\r\n"},
			{[][]string{{"MULTI"}, {"GET"}, {"EXEC"}}, "$1\r\nv\r\n"},
		} {
			conn := dialRaw(t, addr)
			conn.do("DEL", "{o}k")
			// Another key of the slot watched: the transaction runs.
			cmds := append([][]string{{"WATCH", "{o}w"}, {"SET", "{o}k", "v"}}, p.end...)
			conn.send(append(cmds, []string{"GET", "{o}k"})...)
			for range cmds {
				conn.read()
			}
			if got := conn.read(); got != p.want {
				t.Errorf("%d: %q: GET after them answered %q, want %q", i, p.end, got, p.want)
			}
		}
	})
}

// EXEC, DISCARD, MULTI, WATCH and RESET of a wrong number of arguments
// are refused as by a node, which checks that first: inside MULTI, each
// aborts the transaction, and EXEC's ends it (EXECABORT) instead of
// running it. Both serving paths.
func TestTransactionControlArity(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, cmds := range [][][]string{
		{{"MULTI"}, {"PING"}, {"EXEC", "y"}, {"EXEC"}},
		{{"MULTI"}, {"DISCARD", "z"}, {"PING"}, {"EXEC"}},
		{{"MULTI"}, {"MULTI", "x"}, {"PING"}, {"EXEC"}},
		{{"MULTI"}, {"WATCH"}, {"PING"}, {"EXEC"}},
		{{"MULTI"}, {"RESET", "x"}, {"PING"}, {"EXEC"}},
		{{"EXEC", "y"}, {"PING"}},
	} {
		answers := func(t *testing.T, addr string) []string {
			conn := dialRaw(t, addr)
			conn.send(cmds...)
			got := make([]string, len(cmds))
			for i := range got {
				got[i] = conn.read()
			}
			return got
		}
		n, err := c.Primary(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		want := answers(t, n.Addr)
		eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
			got := answers(t, serveConfig(t, cfg))
			likeTheNode(t, fmt.Sprintf("%q: ", cmds), got, want)
		})
	}
}

// A client that switches protocol with HELLO while it watches keys gets
// the replies on its watch's connection in the new protocol, as from a
// node, and HELLO's own reply is sluice's. Both serving paths.
func TestTransactionWatchAcrossHello(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		conn.send([]string{"WATCH", "{p}k"}, []string{"HSET", "{p}h", "f", "v"},
			[]string{"HELLO", "3"}, []string{"HGETALL", "{p}h"},
			[]string{"HELLO", "2"}, []string{"HGETALL", "{p}h"}, []string{"UNWATCH"})
		for i, want := range []string{"+OK\r\n", "", "%7\r\n$6\r\nserver\r\n$6\r\nsluice\r\n", "%1\r\n$1\r\nf\r\n$1\r\nv\r\n",
			"*14\r\n$6\r\nserver\r\n$6\r\nsluice\r\n", "*2\r\n$1\r\nf\r\n$1\r\nv\r\n", "+OK\r\n"} {
			if got := conn.read(); !strings.HasPrefix(got, want) {
				t.Errorf("reply %d: %q, want %q...", i, got, want)
			}
		}
	})
}

// An EXEC the node refuses before running it (a wrong number of
// arguments) discards the transaction, and with it the client's watches,
// outside MULTI too: a transaction after it runs whatever the key went
// through since, as on a node. Both serving paths.
func TestTransactionRefusedExecEndsWatch(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	k := "{rx}k"
	n := primaryOf(t, c, k)
	answers := func(t *testing.T, conn *rawConn) []string {
		other := dialRaw(t, n.Addr)
		got := []string{conn.do("WATCH", k), conn.do("EXEC", "x")}
		other.do("INCR", k) // after the watch ended: the transaction runs
		return append(got, conn.do("MULTI"), conn.do("EXISTS", k), conn.do("EXEC"))
	}
	want := answers(t, dialRaw(t, n.Addr))
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		got := answers(t, dialRaw(t, serveConfig(t, cfg)))
		likeTheNode(t, "", got, want)
	})
}

// A transaction with keys of two slots (of one node) and a refused
// command answers as that node: CROSSSLOT when both slots were queued
// before the refusal (Redis checks the slots before EXEC looks for
// refused commands), EXECABORT when the second slot came after it (Redis
// queues nothing once a command is refused). A WATCH inside MULTI on
// keys of two slots is refused for its slots, which aborts the
// transaction, before it is refused for being inside MULTI, which does
// not. Both serving paths.
func TestTransactionCrossSlotAndRefused(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	a := "{cs}a"
	n := primaryOf(t, c, a)
	// A key of another slot of the same node.
	b := keyWhere(t, c, "cs", "b", func(m *clustertest.Node, key string) bool { return m == n && slot.Of(key) != slot.Of(a) })
	for _, cmds := range [][][]string{
		{{"MULTI"}, {"SET", a, "1"}, {"SET", b, "1"}, {"NOSUCH"}, {"EXEC"}},
		{{"MULTI"}, {"SET", a, "1"}, {"SET", b, "1"}, {"GET"}, {"EXEC"}},
		{{"MULTI"}, {"SET", a, "1"}, {"NOSUCH"}, {"SET", b, "1"}, {"EXEC"}},
		{{"MULTI"}, {"GET"}, {"SET", a, "1"}, {"SET", b, "1"}, {"EXEC"}},
		{{"MULTI"}, {"WATCH", a, b}, {"SET", a, "1"}, {"EXEC"}},
		{{"MULTI"}, {"WATCH", a, a}, {"SET", a, "1"}, {"EXEC"}},
	} {
		answers := func(t *testing.T, addr string) []string {
			conn := dialRaw(t, addr)
			conn.send(cmds...)
			got := make([]string, len(cmds))
			for i := range got {
				got[i] = conn.read()
			}
			return got
		}
		want := answers(t, n.Addr)
		eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
			got := answers(t, serveConfig(t, cfg))
			likeTheNode(t, fmt.Sprintf("%q: ", cmds), got, want)
		})
	}
}

// An EXEC the user may not run is refused as a node refuses it, in MULTI
// or not, watching or not: EXECABORT, and the transaction discarded, so
// the commands after it run. Both serving paths.
func TestTransactionExecNotPermitted(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	k := "{np}k"
	n := primaryOf(t, c, k)
	rules := []string{"on", ">e", "~*", "+@all", "-exec"}
	if err := n.Do(ctx, append([]string{"ACL", "SETUSER", "eve"}, rules...)...).Error(); err != nil {
		t.Fatal(err)
	}
	us := users(t, "user eve "+strings.Join(rules, " "), "")
	answers := func(t *testing.T, addr string) []string {
		conn, other := dialRaw(t, addr), dialRaw(t, addr)
		var got []string
		for _, cmd := range [][]string{{"AUTH", "eve", "e"}, {"WATCH", k}, {"EXEC"}, {"MULTI"}, {"INCR", k}, {"EXEC"}} {
			got = append(got, conn.do(cmd...))
		}
		other.do("AUTH", "eve", "e")
		other.do("SET", k, "1") // after the watch ended
		for _, cmd := range [][]string{{"GET", k}, {"DISCARD"}, {"WATCH", k}, {"MULTI"}, {"GET", k}, {"EXEC"}} {
			got = append(got, conn.do(cmd...))
		}
		other.do("DEL", k)
		return got
	}
	want := answers(t, n.Addr)
	// sluice says which user, as Redis 7.2 does; Redis 7.0 says "this user".
	for i := range want {
		want[i] = strings.Replace(want[i], "NOPERM this user", "NOPERM User eve", 1)
	}
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Users: us}, func(t *testing.T, cfg proxy.Config) {
		got := answers(t, serveConfig(t, cfg))
		likeTheNode(t, "", got, want)
	})
}

// A WATCH of a key another primary holds than the keys watched already is
// refused with CROSSSLOT: no transaction could use both (Redis Cluster
// answers MOVED there), and the watches kept hold: a change to the first
// key still aborts the transaction. Both serving paths.
func TestTransactionWatchOnTwoPrimaries(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	a := "{w2}a"
	n := primaryOf(t, c, a)
	b := keyWhere(t, c, "w2", "b", func(m *clustertest.Node, _ string) bool { return m != n })
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		conn := dialRaw(t, addr)
		conn.send([]string{"WATCH", a}, []string{"WATCH", b})
		if got := conn.read(); got != "+OK\r\n" {
			t.Fatalf("WATCH %s: %q", a, got)
		}
		if got := conn.read(); !strings.HasPrefix(got, "-CROSSSLOT ") {
			t.Fatalf("WATCH %s after WATCH %s: %q, want CROSSSLOT", b, a, got)
		}
		other := dialRaw(t, addr)
		other.send([]string{"SET", a, "changed"})
		if got := other.read(); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		conn.send([]string{"MULTI"}, []string{"SET", a, "mine"}, []string{"EXEC"})
		for _, want := range []string{"+OK\r\n", "+QUEUED\r\n", "*-1\r\n"} {
			if got := conn.read(); got != want {
				t.Fatalf("transaction after its watched key changed: %q, want %q", got, want)
			}
		}
	})
}

// keyWhere is the first key "{<tag><i>}<suffix>", for i = 0, 1, ..., whose
// primary ok accepts.
func keyWhere(t *testing.T, c *clustertest.Cluster, tag, suffix string, ok func(n *clustertest.Node, key string) bool) string {
	t.Helper()
	for i := 0; i < 100_000; i++ {
		key := "{" + tag + strconv.Itoa(i) + "}" + suffix
		n := primaryOf(t, c, key)
		if ok(n, key) {
			return key
		}
	}
	t.Fatalf("no key {%s<i>}%s fits", tag, suffix)
	return ""
}

// likeTheNode fails t for each reply in got that is not the node's in
// want; what names the exchange.
func likeTheNode(t *testing.T, what string, got, want []string) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%sreply %d is %q, want %q as the node's", what, i, got[i], want[i])
		}
	}
}

// primaryOf is the node that serves key's slot as its primary.
func primaryOf(t *testing.T, c *clustertest.Cluster, key string) *clustertest.Node {
	t.Helper()
	n, err := c.Primary(context.Background(), slot.Of(key))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// replicasOf are the nodes that replicate primary; a cluster with none
// fails the test.
func replicasOf(t *testing.T, c *clustertest.Cluster, primary *clustertest.Node) []*clustertest.Node {
	t.Helper()
	_, port, _ := strings.Cut(primary.Addr, ":")
	var replicas []*clustertest.Node
	for _, n := range c.Nodes {
		info, err := n.Do(context.Background(), "INFO", "replication").ToString()
		if err == nil && strings.Contains(info, "master_port:"+port+"\r\n") {
			replicas = append(replicas, n)
		}
	}
	if len(replicas) == 0 {
		t.Fatalf("no replica of %s", primary.Addr)
	}
	return replicas
}

// onEachPath serves a router of cfg on each serving path (one event loop,
// and goroutines: Loops 1 and -1), each router its own, and dials each.
func onEachPath(t *testing.T, cfg router.ClusterConfig) map[int]*rawConn {
	t.Helper()
	conns := map[int]*rawConn{}
	for _, loops := range []int{1, -1} {
		r := newRouterConfig(t, cfg)
		waitRouter(t, r)
		conns[loops] = dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
	}
	return conns
}

// cmdCalls is how many calls of cmd n counts (INFO commandstats).
func cmdCalls(n *clustertest.Node, cmd string) int {
	stats, _ := n.Do(context.Background(), "INFO", "commandstats").ToString()
	_, after, ok := strings.Cut(stats, "cmdstat_"+cmd+":calls=")
	if !ok {
		return 0
	}
	calls, _ := strconv.Atoi(after[:strings.IndexByte(after, ',')])
	return calls
}

// nameOn is the first of prefix0, prefix1, ... whose slot n owns.
func nameOn(t *testing.T, c *clustertest.Cluster, n *clustertest.Node, prefix string) string {
	t.Helper()
	for i := 0; ; i++ {
		if name := fmt.Sprintf("%s%d", prefix, i); primaryOf(t, c, name) == n {
			return name
		}
	}
}

// otherPrimary is a primary of c's first two other than n: where a test
// moves a slot of n's.
func otherPrimary(c *clustertest.Cluster, n *clustertest.Node) *clustertest.Node {
	if c.Nodes[0] != n {
		return c.Nodes[0]
	}
	return c.Nodes[1]
}

// A watching client whose node is killed, and whose replica is promoted,
// has lost its watch: WATCH again answers OK, as the README promises for
// a broken connection (not CROSSSLOT: the key's slot is the one watched,
// now on the promoted replica), EXEC answers null, and the retry that
// follows runs on the new primary.
func TestTransactionWatchAcrossAFailover(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{PartialCoverage: true})
	r := newForwarding(t, c)
	ctx := context.Background()
	w := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	k := "{failover}k"
	victim := primaryOf(t, c, k)
	w.do("SET", k, "0")
	if got := w.do("WATCH", k); got != "+OK\r\n" {
		t.Fatalf("WATCH: %q", got)
	}
	victim.Kill()
	other := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	// Promoted, as sluice sees it and as the cluster tells it (a node
	// asked may still be behind the others: polled too).
	promoted := func() bool {
		p, err := c.Primary(ctx, slot.Of(k))
		return err == nil && p != victim && other.do("GET", k) == "$1\r\n0\r\n"
	}
	for deadline := time.Now().Add(15 * time.Second); !promoted(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the key's replica was not promoted, or sluice does not use it")
		}
	}
	if got := w.do("WATCH", k); got != "+OK\r\n" {
		t.Errorf("WATCH of the same key after its node failed over: %q, want +OK (the watch is lost)", got)
	}
	w.send([]string{"MULTI"}, []string{"SET", k, "1"}, []string{"EXEC"})
	w.read()
	w.read()
	if got := w.read(); got != "*-1\r\n" {
		t.Errorf("EXEC of a lost watch: %q, want null", got)
	}
	w.send([]string{"WATCH", k}, []string{"MULTI"}, []string{"SET", k, "2"}, []string{"EXEC"})
	for _, want := range []string{"+OK\r\n", "+OK\r\n", "+QUEUED\r\n", "*1\r\n+OK\r\n"} {
		if got := w.read(); got != want {
			t.Errorf("the retry on the promoted replica: %q, want %q", got, want)
		}
	}
	if got := other.do("GET", k); got != "$1\r\n2\r\n" {
		t.Errorf("after the retry: %q, want 2", got)
	}
}

// A watching client whose node is killed keeps working for the keys of
// the healthy primaries while its watch lasts: the watch is lost with
// the connection (EXEC answers null), so its commands need not go to the
// dead node, whose connection error is no answer for another node's key.
// UNWATCH of the lost watch answers OK.
func TestTransactionLostWatchOnAKilledNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true})
	r := newForwarding(t, c)
	w := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	k := "{killed}k"
	victim := primaryOf(t, c, k)
	var healthy string
	for i := 0; healthy == ""; i++ {
		if h := "h" + strconv.Itoa(i); primaryOf(t, c, h) != victim {
			healthy = h
		}
	}
	w.do("SET", healthy, "v")
	for i, end := range [][]string{{"UNWATCH"}, {"EXEC"}} {
		if i > 0 {
			if err := victim.Restart(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "the key's node answers", func() bool { return w.do("SET", k, "0") == "+OK\r\n" })
		if got := w.do("WATCH", k); got != "+OK\r\n" {
			t.Fatalf("WATCH: %q", got)
		}
		victim.Kill()
		// The watch's connection is seen broken at once (kill -9 closes
		// it); a GET may meet it before that, on the connection (ERR) or
		// while it is dialled again (CLUSTERDOWN: not sent).
		for deadline := time.Now().Add(5 * time.Second); ; {
			got := w.do("GET", healthy)
			if got == "$1\r\nv\r\n" {
				break
			}
			met := strings.HasPrefix(got, "-ERR sluice: connection to "+victim.Addr) ||
				strings.HasPrefix(got, "-CLUSTERDOWN sluice: connection to "+victim.Addr)
			if !met || time.Now().After(deadline) {
				t.Fatalf("GET of a healthy node's key in a watch lost with its killed node: %q", got)
			}
		}
		if end[0] == "EXEC" {
			w.do("MULTI")
			w.do("SET", healthy, "x")
		}
		want := map[string]string{"UNWATCH": "+OK\r\n", "EXEC": "*-1\r\n"}[end[0]]
		if got := w.do(end...); got != want {
			t.Errorf("%s of a watch lost with its killed node: %q, want %q", end[0], got, want)
		}
		if got := w.do("GET", healthy); got != "$1\r\nv\r\n" {
			t.Errorf("GET after %s: %q", end[0], got)
		}
	}
}

// CLIENT LIST's cmd= names a transaction's commands as Redis does: each
// queued one when it is queued, then EXEC, not the MULTI before them.
func TestClientListNamesTransactionCommands(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		tx, watcher := dialRaw(t, addr), dialRaw(t, addr)
		id := strings.Trim(tx.do("CLIENT", "ID"), ":\r\n")
		for _, step := range []struct{ args []string }{
			{[]string{"MULTI"}},
			{[]string{"SET", "{cl}k", "v"}},
			{[]string{"GET", "{cl}k"}},
			{[]string{"EXEC"}},
		} {
			if got := tx.do(step.args...); strings.HasPrefix(got, "-") {
				t.Fatalf("%q: %q", step.args, got)
			}
			want := " cmd=" + strings.ToLower(step.args[0]) + " "
			if list := watcher.do("CLIENT", "LIST", "ID", id); !strings.Contains(list, want) {
				t.Errorf("after %q: CLIENT LIST %q, want%s", step.args, list, want)
			}
		}
	})
}

// A watched slot that moves to another primary before EXEC, and that
// sluice has read in the slot map by then, has lost its watch: the
// transaction on the watched key must not run unwatched on the new owner
// (it ran there, as one on another primary's keys does).
func TestTransactionWatchedSlotMovedAway(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		w, other := dialRaw(t, addr), dialRaw(t, addr)
		k := "{wmoved" + strconv.Itoa(-loops) + "}k"
		from := primaryOf(t, c, k)
		to := otherPrimary(c, from)
		other.do("SET", k, "0")
		if got := w.do("WATCH", k); got != "+OK\r\n" {
			t.Fatalf("loops %d: WATCH: %q", loops, got)
		}
		if err := c.MoveSlot(ctx, slot.Of(k), to); err != nil {
			t.Fatal(err)
		}
		// Until sluice sends the key's commands to its new owner: the old
		// one refuses no more of them.
		waitUntil(t, "sluice reads the moved slot", func() bool {
			before := cmdStat(t, from, "get", "rejected_calls")
			other.do("GET", k)
			return cmdStat(t, from, "get", "rejected_calls") == before
		})
		w.send([]string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"})
		for i, want := range []string{"+OK\r\n", "+QUEUED\r\n", "*-1\r\n"} {
			if got := w.read(); got != want {
				t.Errorf("loops %d: transaction whose watched slot moved away, reply %d: %q, want %q", loops, i, got, want)
			}
		}
		if got := other.do("GET", k); got != "$1\r\n0\r\n" {
			t.Errorf("loops %d: the watched key after the aborted transaction: %q", loops, got)
		}
		// The client's retry, watching again, runs on the new owner.
		w.send([]string{"WATCH", k}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"})
		for i, want := range []string{"+OK\r\n", "+OK\r\n", "+QUEUED\r\n", "*1\r\n:1\r\n"} {
			if got := w.read(); got != want {
				t.Errorf("loops %d: the retry, reply %d: %q, want %q", loops, i, got, want)
			}
		}
	}
}

// cmdStat is a field of command cmd's line in n's INFO commandstats
// ("calls", "rejected_calls", ...), 0 before n has run it.
func cmdStat(t *testing.T, n *clustertest.Node, cmd, field string) int {
	t.Helper()
	stats, err := n.Do(context.Background(), "INFO", "commandstats").ToString()
	if err != nil {
		t.Fatal(err)
	}
	_, line, ok := strings.Cut(stats, "cmdstat_"+cmd+":")
	if !ok {
		return 0
	}
	line, _, _ = strings.Cut(line, "\r\n")
	for kv := range strings.SplitSeq(line, ",") {
		if v, ok := strings.CutPrefix(kv, field+"="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
