package proxy_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// callCounts is a commandstats line's calls, rejected_calls and
// failed_calls.
type callCounts struct{ calls, rejected, failed int }

// commandstats parses INFO commandstats into counts by command.
func commandstats(t *testing.T, conn *rawConn) map[string]callCounts {
	t.Helper()
	counts := map[string]callCounts{}
	re := regexp.MustCompile(`cmdstat_([^:]*):calls=(\d+),usec=\d+,usec_per_call=[\d.]+,rejected_calls=(\d+),failed_calls=(\d+)`)
	for _, m := range re.FindAllStringSubmatch(conn.do("INFO", "commandstats"), -1) {
		var n [3]int
		for i := range n {
			n[i], _ = strconv.Atoi(m[i+2])
		}
		counts[m[1]] = callCounts{n[0], n[1], n[2]}
	}
	return counts
}

// INFO commandstats through sluice counts what a node counts for the same
// commands: calls, those refused before they ran (a wrong arity, a
// CROSSSLOT) and those that ran and failed (a node's WRONGTYPE, a script's
// error, EXECABORT, MULTI nested, EXEC and DISCARD without MULTI), and a
// transaction's commands once EXEC ran them, each failed or not by its
// reply.
func TestCommandstatsAsANode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	key := "cs:{c}"
	steps := [][]string{
		{"SET", key, "v"},
		{"LPUSH", key, "x"}, // failed
		{"GET"},             // rejected
		{"GET", key},
		{"EVAL", "return redis.error_reply('MYERR boom')", "0"}, // failed
		{"MSETNX", key, "1", "cs:{d}", "2"},                     // rejected: CROSSSLOT
		{"EVAL", "return {1, redis.error_reply('IN x')}", "0"},  // failed: an error within
		{"EVAL", "return {1, 2}", "0"},
		{"MULTI"}, {"SET", key, "1"}, {"INCR", key}, {"LPUSH", key, "x"}, {"GET", key},
		{"EVAL", "return {redis.error_reply('IN x')}", "0"}, {"EXEC"},
		{"MULTI"}, {"MULTI"}, {"GET"}, {"EXEC"}, // a failed MULTI, a rejected GET, a failed EXEC
		{"MULTI"}, {"DISCARD"},
		{"EXEC"}, {"DISCARD"}, // without MULTI: they run, and fail
	}
	names := []string{"set", "lpush", "get", "eval", "msetnx", "multi", "incr", "exec", "discard"}
	direct := dialRaw(t, nodeOf(t, c, key).Addr)
	before := commandstats(t, direct)
	direct.doAll(steps)
	after := commandstats(t, direct)
	want := map[string]callCounts{}
	for _, n := range names {
		a, b := after[n], before[n]
		want[n] = callCounts{a.calls - b.calls, a.rejected - b.rejected, a.failed - b.failed}
	}
	if want["get"] != (callCounts{2, 2, 0}) || want["exec"] != (callCounts{3, 0, 2}) || want["discard"] != (callCounts{2, 0, 1}) || want["incr"] != (callCounts{1, 0, 0}) || want["eval"] != (callCounts{4, 0, 3}) {
		t.Fatalf("the node counted %v", want)
	}
	throughSluice(t, c, steps, func(t *testing.T, proto string, conn *rawConn) {
		got := commandstats(t, conn)
		for _, n := range names {
			if got[n] != want[n] {
				t.Errorf("RESP%s: %s counted %+v, the node %+v", proto, n, got[n], want[n])
			}
		}
		if got["hello"].calls != 1 {
			t.Errorf("RESP%s: hello counted %+v", proto, got["hello"])
		}
		// INCR ran in the transaction only: a node has its latencies
		// too.
		if lat := conn.do("INFO", "latencystats"); !strings.Contains(lat, "latency_percentiles_usec_incr:") {
			t.Errorf("RESP%s: no latencies of INCR: %q", proto, lat)
		}
	})
}

// sluice's own commands count as a node's do: THROTTLE's decisions, one
// refused for its arity and one that failed on its arguments; a
// subcommand under its full name; an unknown command and an unknown
// subcommand nowhere; INFO not before it has answered. Commandstats is
// an extra section, as in Redis.
func TestCommandstatsOfSluicesCommands(t *testing.T) {
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		cfg.Decider, cfg.Backend = router.NewMemory(0), "embedded"
		_, addr := serveServer(t, cfg)
		conn := dialRaw(t, addr)
		for _, st := range [][]string{
			{"THROTTLE", "k", "5", "1", "1s"},
			{"THROTTLE", "k", "5", "1", "1s"},
			{"THROTTLE"},                      // rejected: its arity
			{"THROTTLE", "k", "0", "1", "1s"}, // failed
			{"CLIENT", "ID"},
			{"CLIENT", "NOSUCH"},
			{"NOSUCH"},
		} {
			conn.do(st...)
		}
		got := commandstats(t, conn)
		if got["throttle"] != (callCounts{3, 1, 1}) || got["client|id"] != (callCounts{1, 0, 0}) {
			t.Errorf("throttle %+v, client|id %+v", got["throttle"], got["client|id"])
		}
		if _, ok := got["info"]; ok || len(got) != 2 {
			t.Errorf("counted %v, want throttle and client|id only", got)
		}
		if got := commandstats(t, conn); got["info"] != (callCounts{1, 0, 0}) {
			t.Errorf("the second INFO says %+v of the first", got["info"])
		}
		for args, in := range map[string]bool{"": false, "default": false, "all": true, "commandstats": true} {
			info := conn.do(append([]string{"INFO"}, strings.Fields(args)...)...)
			if got := strings.Contains(info, "# Commandstats\r\ncmdstat_client|id:calls=1,"); got != in {
				t.Errorf("INFO %s: commandstats shown %v, want %v", args, got, in)
			}
		}
		// latencystats: the decisions' times from read to answer, and
		// none of sluice's own for what it answers as it reads.
		lat := conn.do("INFO", "latencystats")
		m := regexp.MustCompile(`latency_percentiles_usec_throttle:p50=([\d.]+),p99=([\d.]+),p99\.9=([\d.]+)\r\n`).FindStringSubmatch(lat)
		if m == nil {
			t.Fatalf("no latencies of THROTTLE: %q", lat)
		}
		p50, _ := strconv.ParseFloat(m[1], 64)
		p99, _ := strconv.ParseFloat(m[2], 64)
		p999, _ := strconv.ParseFloat(m[3], 64)
		if !(p50 > 0 && p50 <= p99 && p99 <= p999) {
			t.Errorf("THROTTLE's percentiles %v, %v, %v", p50, p99, p999)
		}
		if !strings.Contains(lat, "latency_percentiles_usec_client|id:p50=0.000,p99=0.000,p99.9=0.000\r\n") {
			t.Errorf("CLIENT ID's latencies: %q", lat)
		}
		if info := conn.do("INFO"); strings.Contains(info, "Latencystats") {
			t.Errorf("a plain INFO gives latencystats")
		}
	})
}

// A command its user may not run is refused before it runs, as Redis
// counts it: a rejected call, the cluster's command as sluice's own.
func TestCommandstatsCountsNOPERMAsRejected(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	r := newForwarding(t, c)
	us := users(t, "user default on nopass ~* +@all -lpush -throttle", "")
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Users: us}))
	for _, args := range [][]string{{"LPUSH", "np", "x"}, {"THROTTLE", "np", "5", "1", "1s"}} {
		if got := conn.do(args...); !strings.HasPrefix(got, "-NOPERM") {
			t.Fatalf("%q answered %q, want NOPERM", args, got)
		}
	}
	got := commandstats(t, conn)
	if got["lpush"] != (callCounts{0, 1, 0}) || got["throttle"] != (callCounts{0, 1, 0}) {
		t.Errorf("lpush %+v, throttle %+v, want one rejected call each", got["lpush"], got["throttle"])
	}
}

// A blocking command counts as a node counts it: once, answered by a push
// or timed out; failed when CLIENT UNBLOCK ended it, with an error or its
// timeout's reply (Redis 7.0's updateStatsOnUnblock), and CLIENT UNBLOCK
// failed for the error it put in that reply.
func TestCommandstatsOfBlockingCommands(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	key := "cs:{b}"
	names := []string{"blpop", "client|unblock", "lpush"}
	steps := func(t *testing.T, addr string) map[string]callCounts {
		admin, v := dialRaw(t, addr), dialRaw(t, addr)
		before := commandstats(t, admin)
		id := strings.TrimSuffix(strings.TrimPrefix(v.do("CLIENT", "ID"), ":"), "\r\n")
		for _, end := range [][]string{{"CLIENT", "UNBLOCK", id, "ERROR"}, {"CLIENT", "UNBLOCK", id}, {"LPUSH", key, "x"}} {
			v.send([]string{"BLPOP", key, "0"})
			waitUntil(t, "the client blocks", func() bool {
				return strings.Contains(clientLine(t, admin.do("CLIENT", "LIST", "ID", id)), " flags=b ")
			})
			admin.do(end...)
			v.read()
		}
		v.do("BLPOP", key, "0.01")
		admin.do("CLIENT", "UNBLOCK", id, "ERROR") // not blocked: 0
		after := commandstats(t, admin)
		got := map[string]callCounts{}
		for _, n := range names {
			a, b := after[n], before[n]
			got[n] = callCounts{a.calls - b.calls, a.rejected - b.rejected, a.failed - b.failed}
		}
		return got
	}
	want := steps(t, primaryOf(t, c, key).Addr)
	if want["blpop"] != (callCounts{4, 0, 2}) || want["client|unblock"] != (callCounts{3, 0, 1}) {
		t.Fatalf("the node counted %v", want)
	}
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		_, addr := serveServer(t, cfg)
		got := steps(t, addr)
		for _, n := range names {
			if got[n] != want[n] {
				t.Errorf("%s counted %+v, the node %+v", n, got[n], want[n])
			}
		}
	})
}
