package proxy_test

import (
	"context"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// Metrics after known traffic through a cluster: decisions by source,
// passthrough commands by name, every primary healthy; no label carries a
// key.
func TestMetricsAfterKnownTraffic(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	// A named policy's request is the same router.Request an inline limit
	// makes, so the cluster decides it alike.
	policies := mustPolicies(t, []proxy.Policy{{Name: "two", Capacity: 2, Refill: 1, Period: "1s"}}, []proxy.KeyRule{{"mk:p*", "two"}})
	srv, addr := serveServer(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster", Policies: policies})
	conn := dialRaw(t, addr)
	conn.do("SET", "mk:1", "v")
	conn.do("GET", "mk:1")
	conn.do("GET", "mk:2")
	// Answered an error by sluice itself: not forwarded, so not counted
	// as forwarded.
	for _, args := range [][]string{{"FLUSHALL"}, {"MSETNX", "mk:a", "1", "mk:b", "2"}, {"SHUTDOWN"}} {
		if got := conn.do(args...); !strings.HasPrefix(got, "-") {
			t.Errorf("%q: got %q, want an error", args, got)
		}
	}
	// A transaction's commands are forwarded when EXEC sends them, and
	// counted then; an aborted one's never are.
	for _, step := range [][]string{{"MULTI"}, {"SET", "mk:1", "w"}, {"GET", "mk:1"}, {"EXEC"},
		{"MULTI"}, {"GET", "mk:1"}, {"MSETNX", "mk:a", "1", "mk:b", "2"}, {"EXEC"}} {
		conn.do(step...)
	}
	// A DISCARDed transaction, and an UNWATCH with nothing watched, never
	// reach the cluster.
	for _, step := range [][]string{{"MULTI"}, {"GET", "mk:1"}, {"DISCARD"}, {"UNWATCH"}} {
		conn.do(step...)
	}
	for range 3 {
		conn.do("THROTTLE", "mk:t", "2", "1", "1s")
	}
	conn.do("THROTTLE", "mk:p1", "POLICY", "two")
	conn.do("THROTTLE", "mk:p1")
	if got := conn.do("THROTTLE", "mk:p1"); !strings.HasPrefix(got, "*5\r\n:1\r\n:2\r\n") {
		t.Errorf("a third call by a policy of 2: got %q, want limited", got)
	}
	text := scrape(t, srv)
	for _, want := range []string{
		`sluice_passthrough_commands_total{command="get"} 3`,
		`sluice_passthrough_commands_total{command="set"} 2`,
		`sluice_passthrough_commands_total{command="exec"} 1`,
		`sluice_passthrough_commands_total{command="multi"} 1`, // the EXEC's block's, not the aborted one's
		`sluice_decisions_total{policy="inline",result="allowed",source="cluster"} 2`,
		`sluice_decisions_total{policy="inline",result="limited",source="cluster"} 1`,
		`sluice_decisions_total{policy="two",result="allowed",source="cluster"} 2`,
		`sluice_decisions_total{policy="two",result="limited",source="cluster"} 1`,
		`sluice_decision_duration_seconds_count 6`,
		`sluice_connected_clients 1`,
		`sluice_cluster_connected 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, n := range c.Nodes {
		if want := `sluice_shard_healthy{shard="` + n.Addr + `"} 1`; !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, name := range []string{"flushall", "msetnx", "shutdown", "discard", "unwatch"} {
		if strings.Contains(text, `command="`+name+`"`) {
			t.Errorf("%s, not forwarded, counted as forwarded", name)
		}
	}
	if strings.Contains(text, "mk:") {
		t.Error("a metric is labelled by a key")
	}
	if t.Failed() {
		t.Log(text)
	}
}

// The decision histogram counts decisions, as sluice_decisions_total does:
// a THROTTLE.RESET decides nothing, so it is not observed.
func TestMetricsDurationCountsDecisionsOnly(t *testing.T) {
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		cfg.Decider, cfg.Backend = router.NewMemory(0), "embedded"
		srv, addr := serveServer(t, cfg)
		conn := dialRaw(t, addr)
		for _, args := range [][]string{
			{"THROTTLE", "dc", "2", "1", "1s"},
			{"THROTTLE.RESET", "dc"},
			{"CL.THROTTLE", "dc", "1", "1", "1"},
			{"THROTTLE.RESET", "dc"},
			{"GCRA", "dc", "1", "1", "1"},
			{"THROTTLE.RESET", "nothing"},
		} {
			if got := conn.do(args...); strings.HasPrefix(got, "-") {
				t.Fatalf("%q: %q", args, got)
			}
		}
		text := scrape(t, srv)
		for _, want := range []string{
			`sluice_decisions_total{policy="inline",result="allowed",source="embedded"} 3`,
			`sluice_decision_duration_seconds_count 3`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		if t.Failed() {
			t.Log(text)
		}
	})
}

// An error reply the cluster gave counts as one, as Redis counts every
// error reply it sends in total_error_replies: INFO and the metric count
// the nodes' WRONGTYPE and a script's error with sluice's own refusals.
func TestErrorRepliesCountTheNodes(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		srv, addr := serveServer(t, cfg)
		conn := dialRaw(t, addr)
		conn.do("SET", "er:"+t.Name(), "v")
		conn.do("SET", "sluice:bk:"+t.Name(), "v") // not a bucket
		for _, args := range [][]string{
			{"LPUSH", "er:" + t.Name(), "x"},                     // the node's WRONGTYPE
			{"EVAL", "return redis.error_reply('MINE no')", "0"}, // a script's error, from the node
			{"SHUTDOWN"}, // sluice's own refusal
			{"THROTTLE", "bk:" + t.Name(), "5", "1", "1s"}, // the bucket script's WRONGTYPE: no decision
		} {
			if got := conn.do(args...); !strings.HasPrefix(got, "-") {
				t.Fatalf("%q: got %q, want an error", args, got)
			}
		}
		if info := conn.do("INFO", "stats"); !strings.Contains(info, "\r\ntotal_error_replies:4\r\n") {
			t.Errorf("INFO stats: %q, want total_error_replies:4", info)
		}
		text := scrape(t, srv)
		// The duration is observed for what sluice_decisions_total counts:
		// not the THROTTLE answered an error.
		for _, want := range []string{"\nsluice_error_replies_total 4\n", "\nsluice_decision_duration_seconds_count 0\n"} {
			if !strings.Contains(text, want) {
				t.Errorf("metrics lack %q:\n%s", want, text)
			}
		}
	})
}

// PING's own arity error is an error reply like any other: INFO and the
// metric count it, as Redis counts it in total_error_replies.
func TestPingArityErrorCounted(t *testing.T) {
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		cfg.Decider, cfg.Backend = router.NewMemory(0), "embedded"
		srv, addr := serveServer(t, cfg)
		conn := dialRaw(t, addr)
		if got := conn.do("PING", "a", "b"); got != "-ERR wrong number of arguments for 'ping' command\r\n" {
			t.Fatalf("PING a b: %q", got)
		}
		if info := conn.do("INFO", "stats"); !strings.Contains(info, "\r\ntotal_error_replies:1\r\n") {
			t.Errorf("INFO stats: %q, want total_error_replies:1", info)
		}
		text := scrape(t, srv)
		if want := "\nsluice_error_replies_total 1\n"; !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	})
}

// A client that sends a pipeline and goes before its replies are out:
// the bucket took its decisions, which the backend's decisions_cluster
// and the duration histogram count, and so must throttle_allowed and
// throttle_limited in INFO and sluice_decisions_total (they counted only
// the replies rendered, a fifth of them). Both serving paths: on an
// event loop a client can go while its round is at the cluster.
func TestDecisionsOfAGoneClientCount(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	eachIOConfig(t, proxy.Config{Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		// A router each: INFO's decisions_cluster is the router's.
		r := newForwarding(t, c)
		cfg.Decider, cfg.Forwarder = r, r
		testDecisionsOfAGoneClientCount(t, cfg)
	})
}

func testDecisionsOfAGoneClientCount(t *testing.T, cfg proxy.Config) {
	srv, addr := serveServer(t, cfg)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// A forwarded GET first: THROTTLEs decided behind it wait for its
	// reply, and may be decided and not yet rendered when the client goes.
	pipeline := "*2\r\n$3\r\nGET\r\n$2\r\ngk\r\n" + strings.Repeat("*5\r\n$8\r\nTHROTTLE\r\n$3\r\ngk1\r\n$3\r\n100\r\n$1\r\n1\r\n$2\r\n1s\r\n", 2000)
	if _, err := nc.Write([]byte(pipeline)); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	conn := dialRaw(t, addr)
	field := func(text, name string) int {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `[: ](\d+)\r?$`).FindStringSubmatch(text)
		if m == nil {
			return -1
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	var info string
	infos := 0
	// Once it is gone nothing more of it is read: a goroutine reads and
	// answers its pipeline a part at a time until then.
	waitUntil(t, "the server sees the client go", func() bool {
		infos++
		return strings.Contains(conn.do("INFO", "clients"), "connected_clients:1\r\n")
	})
	// Every THROTTLE read is decided (commands read, less the GET and
	// these INFOs, are the cluster's decisions), and counted: the backend
	// counts a decision when the shard answers, the loop when it takes the
	// result in, a moment later.
	waitUntil(t, "every THROTTLE read decided and counted in throttle_allowed + throttle_limited", func() bool {
		info = conn.do("INFO", "stats", "backend")
		infos++
		n := field(info, "decisions_cluster")
		return n > 0 && n == field(info, "total_commands_processed")-infos &&
			n == field(info, "throttle_allowed")+field(info, "throttle_limited")
	})
	decided := field(info, "decisions_cluster")
	text := scrape(t, srv)
	sum := 0
	for _, m := range regexp.MustCompile(`(?m)^sluice_decisions_total\{.*\} (\d+)$`).FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		sum += n
	}
	if sum != decided {
		t.Errorf("sluice_decisions_total: %d in all, want decisions_cluster %d", sum, decided)
	}
	if got := field(text, "sluice_decision_duration_seconds_count"); got != decided {
		t.Errorf("sluice_decision_duration_seconds_count %d, want %d", got, decided)
	}
}

// The open and closed fallbacks answer as the README says, in every
// command's units, and INFO and the metrics count their decisions alike.
// No seed answers, so the fallback decides every call.
func TestOpenAndClosedRepliesAndCounts(t *testing.T) {
	for _, tc := range []struct {
		policy  router.Policy
		replies []string // THROTTLE k 2 1 1s, its cost 3, CL.THROTTLE k 1 1 1, GCRA k 1 1 1
		counts  []string
	}{
		{router.FallbackOpen, []string{
			// As if the bucket were full: what the cluster says of a new key.
			"*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:1000\r\n",
			"*5\r\n:1\r\n:2\r\n:2\r\n:-1\r\n:0\r\n",
			"*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:1\r\n",
			"*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:1\r\n",
		}, []string{
			"decisions_open:4", "throttle_allowed:3", "throttle_limited:1",
			`sluice_decisions_total{policy="inline",result="allowed",source="open"} 3`,
			`sluice_decisions_total{policy="inline",result="limited",source="open"} 1`,
		}},
		{router.FallbackClosed, []string{
			// Denied, retry after the 100 ms probe interval (1 s rounded
			// up), but never for a cost above the capacity.
			"*5\r\n:1\r\n:2\r\n:0\r\n:100\r\n:2000\r\n",
			"*5\r\n:1\r\n:2\r\n:0\r\n:-1\r\n:2000\r\n",
			"*5\r\n:1\r\n:2\r\n:0\r\n:1\r\n:2\r\n",
			"*5\r\n:1\r\n:2\r\n:0\r\n:1\r\n:2\r\n",
		}, []string{
			"decisions_closed:4", "throttle_allowed:0", "throttle_limited:4",
			`sluice_decisions_total{policy="inline",result="limited",source="closed"} 4`,
		}},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			r := router.NewCluster(router.ClusterConfig{Seeds: []string{"127.0.0.1:1"}, HotThreshold: -1, Fallback: tc.policy})
			t.Cleanup(r.Close)
			srv, addr := serveServer(t, proxy.Config{Decider: r, Backend: "cluster"})
			conn := dialRaw(t, addr)
			for i, args := range [][]string{
				{"THROTTLE", "k", "2", "1", "1s"}, {"THROTTLE", "k", "2", "1", "1s", "3"},
				{"CL.THROTTLE", "k", "1", "1", "1"}, {"GCRA", "k", "1", "1", "1"},
			} {
				if got := conn.do(args...); got != tc.replies[i] {
					t.Errorf("%q: got %q, want %q", args, got, tc.replies[i])
				}
			}
			// A reset is no decision: answered an error, counted as none.
			if got := conn.do("THROTTLE.RESET", "k"); !strings.HasPrefix(got, "-ERR router: reset not applied to the cluster") {
				t.Errorf("THROTTLE.RESET: got %q", got)
			}
			text := conn.do("INFO", "ALL") + scrape(t, srv)
			for _, want := range tc.counts {
				if !strings.Contains(text, want+"\r\n") && !strings.Contains(text, want+"\n") {
					t.Errorf("INFO and metrics lack %q", want)
				}
			}
			if t.Failed() {
				t.Log(text)
			}
		})
	}
}

// A decision made in the pass that read it (the embedded backend) is timed
// too: its latency is not 0.
func TestMetricsDurationOfAnEmbeddedDecision(t *testing.T) {
	for _, loops := range []int{1, -1} {
		srv, addr := serveServer(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops})
		conn := dialRaw(t, addr)
		for range 3 {
			conn.do("THROTTLE", "md:k", "10", "1", "1s")
		}
		text := scrape(t, srv)
		i := strings.Index(text, "\nsluice_decision_duration_seconds_sum ")
		if i < 0 {
			t.Fatalf("loops %d: no duration sum in %q", loops, text)
		}
		sum, err := strconv.ParseFloat(strings.Fields(text[i+1:])[1], 64)
		if err != nil || !(sum > 0) || !strings.Contains(text, "\nsluice_decision_duration_seconds_count 3\n") {
			t.Errorf("loops %d: sum %v (%v), want > 0 over 3 decisions", loops, sum, err)
		}
	}
}

// The errors in EXEC's reply count, each, as a node counts them in
// total_error_replies (they were not counted: the reply is an array).
func TestErrorRepliesCountWithinExec(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	key := "ex:{e}"
	steps := [][]string{{"SET", key, "v"}, {"MULTI"}, {"LPUSH", key, "x"}, {"INCR", key}, {"GET", key}, {"EXEC"}}
	errorReplies := func(conn *rawConn) int {
		m := regexp.MustCompile(`total_error_replies:(\d+)`).FindStringSubmatch(conn.do("INFO", "stats"))
		if m == nil {
			t.Fatal("no total_error_replies")
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	// What a node counts.
	node, err := c.Primary(context.Background(), int(slot.Of(key)))
	if err != nil {
		t.Fatal(err)
	}
	direct := dialRaw(t, node.Addr)
	before := errorReplies(direct)
	for _, st := range steps {
		direct.do(st...)
	}
	want := errorReplies(direct) - before
	if want != 2 {
		t.Fatalf("the node counted %d error replies, want 2", want)
	}
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		for _, proto := range []string{"2", "3"} {
			srv, addr := serveServer(t, cfg)
			conn := dialRaw(t, addr)
			conn.do("HELLO", proto)
			for _, st := range steps {
				conn.do(st...)
			}
			if got := errorReplies(conn); got != want {
				t.Errorf("RESP%s: total_error_replies %d, the node's %d", proto, got, want)
			}
			if text := scrape(t, srv); !strings.Contains(text, "\nsluice_error_replies_total 2\n") {
				t.Errorf("RESP%s: metrics lack sluice_error_replies_total 2", proto)
			}
		}
	})
}
