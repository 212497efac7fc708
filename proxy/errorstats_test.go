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

// errorstats parses INFO errorstats into counts by code.
func errorstats(t *testing.T, conn *rawConn) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, m := range regexp.MustCompile(`errorstat_([^:]*):count=(\d+)`).FindAllStringSubmatch(conn.do("INFO", "errorstats"), -1) {
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	return counts
}

// INFO errorstats through sluice counts what a node counts for the same
// commands: the node's own errors passed on (within a script's table and
// EXEC's reply too) under their codes, sluice's refusals under theirs, a code looked for within
// its first 32 bytes as Redis does. Their sum is total_error_replies.
func TestErrorstatsAsANode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	key := "es:{e}"
	long := strings.Repeat("A", 40) + " long"
	steps := [][]string{
		{"SET", key, "v"},
		{"LPUSH", key, "x"}, // WRONGTYPE
		{"EVAL", "return redis.error_reply('MYERR boom')", "0"},
		{"EVAL", "return redis.error_reply('" + long + "')", "0"}, // no code within 32 bytes: ERR
		// An error within a reply counts as one alone.
		{"EVAL", "return {1, {redis.error_reply('NESTED in a table')}}", "0"},
		{"MULTI"}, {"LPUSH", key, "x"}, {"INCR", key}, {"GET", key}, {"EVAL", "return {redis.error_reply('NESTED in EXEC')}", "0"}, {"EXEC"},
		{"MSETNX", key, "1", "es:{f}", "2"}, // sluice's own CROSSSLOT, as the node's
		{"GET"},                             // arity: sluice's ERR, as the node's
	}
	// What the node counts, before any sluice talks to the cluster.
	direct := dialRaw(t, nodeOf(t, c, key).Addr)
	before := errorstats(t, direct)
	direct.doAll(steps)
	want := errorstats(t, direct)
	for code, n := range before {
		if want[code] -= n; want[code] == 0 {
			delete(want, code)
		}
	}
	if want["WRONGTYPE"] != 2 || want["MYERR"] != 1 || want["CROSSSLOT"] != 1 || want["ERR"] != 3 || want["NESTED"] != 2 {
		t.Fatalf("the node counted %v", want)
	}
	throughSluice(t, c, steps, func(t *testing.T, proto string, conn *rawConn) {
		got := errorstats(t, conn)
		if !equalCounts(got, want) {
			t.Errorf("RESP%s: errorstats %v, the node's %v", proto, got, want)
		}
		sum := 0
		for _, n := range got {
			sum += n
		}
		if stats := conn.do("INFO", "stats"); !strings.Contains(stats, "\r\ntotal_error_replies:"+strconv.Itoa(sum)+"\r\n") {
			t.Errorf("RESP%s: errorstats sum to %d, INFO stats says %q", proto, sum, stats)
		}
	})
}

// doAll sends each of steps and reads its reply.
func (r *rawConn) doAll(steps [][]string) {
	r.t.Helper()
	for _, st := range steps {
		r.do(st...)
	}
}

// throughSluice sends steps through a new sluice on c, on both serving
// paths and in both protocols, and gives check the connection that sent
// them.
func throughSluice(t *testing.T, c *clustertest.Cluster, steps [][]string, check func(t *testing.T, proto string, conn *rawConn)) {
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		for _, proto := range []string{"2", "3"} {
			_, addr := serveServer(t, cfg)
			conn := dialRaw(t, addr)
			conn.do("HELLO", proto)
			conn.doAll(steps)
			check(t, proto, conn)
		}
	})
}

func equalCounts[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Errorstats is one of INFO's default sections, as in Redis 7.0: a plain
// INFO, "default", "all", "everything" and its name give it, another
// section's name does not. A protocol error counts under ERR, and what a
// client makes up as codes does not grow what sluice keeps past 128 of
// them.
func TestErrorstatsSectionAndBound(t *testing.T) {
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		cfg.Decider, cfg.Backend = router.NewMemory(0), "embedded"
		_, addr := serveServer(t, cfg)
		conn := dialRaw(t, addr)
		conn.do("THROTTLE", "k", "0", "1", "1s") // ERR
		for args, in := range map[string]bool{"": true, "default": true, "all": true, "everything": true, "errorstats": true, "stats": false} {
			info := conn.do(append([]string{"INFO"}, strings.Fields(args)...)...)
			if got := strings.Contains(info, "# Errorstats\r\nerrorstat_ERR:count=1\r\n"); got != in {
				t.Errorf("INFO %s: errorstats shown %v, want %v:\n%s", args, got, in, info)
			}
		}
		bad := dialRaw(t, addr)
		if _, err := bad.c.Write([]byte("*1\r\n$x\r\n")); err != nil {
			t.Fatal(err)
		}
		if got := bad.read(); !strings.HasPrefix(got, "-ERR Protocol error") {
			t.Fatalf("a protocol error answered %q", got)
		}
		if got := errorstats(t, conn); got["ERR"] != 2 {
			t.Errorf("after a protocol error: %v, want ERR 2", got)
		}
	})
	t.Run("bound", func(t *testing.T) {
		c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
		r := newForwarding(t, c)
		_, addr := serveServer(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"})
		conn := dialRaw(t, addr)
		for i := range 200 {
			conn.do("EVAL", "return redis.error_reply('C"+strconv.Itoa(i)+" made up')", "0")
		}
		got := errorstats(t, conn)
		if len(got) != 128 || got["C0"] != 1 || got["C127"] != 1 || got["C128"] != 0 {
			t.Errorf("%d codes kept (C0 %d, C127 %d, C128 %d), want the first 128", len(got), got["C0"], got["C127"], got["C128"])
		}
		if stats := conn.do("INFO", "stats"); !strings.Contains(stats, "\r\ntotal_error_replies:200\r\n") {
			t.Errorf("INFO stats %q, want all 200 counted", stats)
		}
		if info := conn.do("INFO"); !strings.Contains(info, "# Errorstats\r\nerrorstat_C0:count=1\r\n") {
			t.Errorf("INFO with a cluster's keyspace, without errorstats:\n%s", info)
		}
	})
}
