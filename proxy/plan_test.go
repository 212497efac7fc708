package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
)

// planSteps are commands of many specs, in several letter cases: run on
// a node, refused by sluice, fanned out, queued in a transaction, and
// through a subscriber's tunnel. %t is the client's own hash tag, so that
// no client's keys or channels touch another's.
var planSteps = [][]string{
	{"SET", "{%t}s", "1"}, {"get", "{%t}s"}, {"GeT", "{%t}s"}, {"INCR", "{%t}n"},
	{"hset", "{%t}h", "f", "v"}, {"HGET", "{%t}h", "f"}, {"LPUSH", "{%t}l", "a"},
	{"lrange", "{%t}l", "0", "-1"}, {"SADD", "{%t}set", "a"}, {"ZADD", "{%t}z", "1", "a"},
	{"XADD", "{%t}x", "*", "f", "v"}, {"EXPIRE", "{%t}s", "100"}, {"ttl", "{%t}s"},
	{"OBJECT", "ENCODING", "{%t}s"}, {"object", "freq", "{%t}s"}, // FREQ fails without an LFU policy
	{"LPUSH", "{%t}s", "x"}, // WRONGTYPE
	{"GET"},                 // its arity
	{"WAIT", "0", "0"}, {"SCRIPT", "DEBUG", "YES"}, {"function", "STATS"}, {"LASTSAVE"},
	{"MSETNX", "{%t}a", "1", "%t-b", "2"}, // CROSSSLOT
	{"DBSIZE"}, {"SCRIPT", "EXISTS", "abc"}, {"script", "load", "return 1"},
	{"CONFIG", "GET", "maxmemory"}, {"PUBSUB", "NUMPAT"},
	{"MULTI"}, {"SET", "{%t}s", "2"}, {"incr", "{%t}n"}, {"Get", "{%t}s"}, {"EXEC"},
	{"PUBLISH", "c:{%t}", "m"}, {"SUBSCRIBE", "c:{%t}"}, {"UNSUBSCRIBE", "c:{%t}"},
	{"SSUBSCRIBE", "sc:{%t}"}, {"SUNSUBSCRIBE", "sc:{%t}"},
	{"CLIENT", "KILL", "ID", "999999999"}, // sluice's own, failed
}

// runPlanSteps sends planSteps with tag for %t, one by one, and reads each
// reply. It runs on a goroutine of its own: it returns its error.
func runPlanSteps(addr, tag string) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	for _, st := range planSteps {
		args := make([][]byte, len(st))
		for i, a := range st {
			args[i] = []byte(strings.ReplaceAll(a, "%t", tag))
		}
		if _, err := conn.Write(router.AppendCommand(nil, args)); err != nil {
			return err
		}
		if _, err := reply.Read(br, nil); err != nil {
			return fmt.Errorf("%q: %w", st, err)
		}
	}
	return nil
}

var passthroughLine = regexp.MustCompile(`(?m)^sluice_passthrough_commands_total\{command="([^"]*)"\} (\d+)$`)

// passthrough is sluice_passthrough_commands_total by command.
func passthrough(t *testing.T, srv *proxy.Server) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, m := range passthroughLine.FindAllStringSubmatch(scrape(t, srv), -1) {
		got[m[1]], _ = strconv.Atoi(m[2])
	}
	return got
}

// Many clients sending commands of many specs at once, on both serving
// paths, count in INFO commandstats and sluice_passthrough_commands_total
// as many times what one client sending them alone counts; CONFIG
// RESETSTAT then resets the one and leaves the other. Run with -race: the
// specs' plans and counts are made while other clients read them.
func TestPlansUnderManyClients(t *testing.T) {
	const clients = 24
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster", AllowAdmin: true}, func(t *testing.T, cfg proxy.Config) {
		one, oneAddr := serveServer(t, cfg)
		if err := runPlanSteps(oneAddr, "one"); err != nil {
			t.Fatal(err)
		}
		wantStats := commandstats(t, dialRaw(t, oneAddr))
		wantFwd := passthrough(t, one)
		delete(wantStats, "info")
		if len(wantStats) < 30 || wantFwd["get"] != 3 || wantFwd["multi"] != 1 || wantFwd["dbsize"] != 1 {
			t.Fatalf("one client counted %v, forwarded %v", wantStats, wantFwd)
		}

		many, addr := serveServer(t, cfg)
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for i := range clients {
			wg.Go(func() {
				if err := runPlanSteps(addr, "c"+strconv.Itoa(i)); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		conn := dialRaw(t, addr)
		got := commandstats(t, conn)
		delete(got, "info")
		for name, w := range wantStats {
			if want := (callCounts{w.calls * clients, w.rejected * clients, w.failed * clients}); got[name] != want {
				t.Errorf("%s counted %+v, want %+v", name, got[name], want)
			}
		}
		if len(got) != len(wantStats) {
			t.Errorf("counted %d commands, one client %d: %v", len(got), len(wantStats), got)
		}
		gotFwd := passthrough(t, many)
		for name, n := range wantFwd {
			if gotFwd[name] != n*clients {
				t.Errorf("%s forwarded %d, want %d", name, gotFwd[name], n*clients)
			}
		}
		if len(gotFwd) != len(wantFwd) {
			t.Errorf("forwarded %v, one client %v", gotFwd, wantFwd)
		}

		if got := conn.do("CONFIG", "RESETSTAT"); got != "+OK\r\n" {
			t.Fatalf("CONFIG RESETSTAT: %q", got)
		}
		if got := commandstats(t, conn); len(got) != 1 || got["config|resetstat"] != (callCounts{1, 0, 0}) {
			t.Errorf("after RESETSTAT, commandstats %v", got)
		}
		after := passthrough(t, many)
		gotFwd["config|resetstat"]++
		if !equalCounts(after, gotFwd) {
			t.Errorf("after RESETSTAT, forwarded %v, want %v", after, gotFwd)
		}
	})
}

// A subscription command counts in sluice_passthrough_commands_total
// whenever it goes to the cluster: also in RESP2 subscribed mode, where
// it goes through the tunnel without forward, as PING does there. In
// RESP3 the same commands counted; in RESP2 an UNSUBSCRIBE, sent while
// subscribed, never did.
func TestPassthroughCountsSubscribedCommands(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		for proto, pingFwd := range map[string]int{"2": 1, "3": 0} {
			srv, addr := serveServer(t, cfg)
			conn := dialRaw(t, addr)
			conn.do("HELLO", proto)
			conn.do("SUBSCRIBE", "a")
			conn.do("SUBSCRIBE", "b")
			conn.do("SSUBSCRIBE", "s")
			conn.do("PING")
			conn.do("SUNSUBSCRIBE")
			conn.do("UNSUBSCRIBE")
			conn.read() // its second confirmation
			got := passthrough(t, srv)
			want := map[string]int{"subscribe": 2, "ssubscribe": 1, "sunsubscribe": 1, "unsubscribe": 1}
			if pingFwd > 0 {
				want["ping"] = pingFwd // in subscribed mode the node answers it
			}
			if !equalCounts(got, want) {
				t.Errorf("RESP%s: forwarded %v, want %v", proto, got, want)
			}
		}
	})
}
