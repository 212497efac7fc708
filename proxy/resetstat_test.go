package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// CONFIG RESETSTAT (with --allow-admin) resets sluice's INFO counts as a
// node resets its own: after it, INFO counts the RESETSTAT and what came
// after, and no error, connection or decision from before; commandstats
// and latencystats list only commands answered since, errorstats nothing.
// The same steps on a node say what to expect; then pipelined, a command
// sent before RESETSTAT whose answer comes after it counts before it.
func TestConfigResetstatAsANode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	key := "rs:{r}"
	before := [][]string{
		{"SET", key, "v"},
		{"GET"}, // rejected
		{"LPUSH", key, "x"},
		{"EVAL", "return redis.error_reply('MYERR boom')", "0"},
	}
	after := [][]string{{"CONFIG", "RESETSTAT"}, {"GET", key}}
	direct := dialRaw(t, c.Nodes[0].Addr)
	direct.doAll(before)
	direct.doAll(after)
	wantStats := map[string]string{}
	info := direct.do("INFO", "stats")
	for _, f := range []string{"total_connections_received", "total_commands_processed", "total_error_replies", "rejected_connections"} {
		wantStats[f] = infoField(t, info, f)
	}
	want := commandstats(t, direct)
	if len(want) != 3 || want["config|resetstat"] != (callCounts{1, 0, 0}) || want["get"] != (callCounts{1, 0, 0}) || want["info"].calls != 1 {
		t.Fatalf("the node counted %v", want)
	}
	if got := errorstats(t, direct); len(got) != 0 {
		t.Fatalf("the node's errorstats %v", got)
	}

	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster", AllowAdmin: true}, func(t *testing.T, cfg proxy.Config) {
		srv, addr := serveServer(t, cfg)
		conn := dialRaw(t, addr)
		conn.do("THROTTLE", "rs", "5", "1", "1s")
		conn.do("THROTTLE", "rs", "0", "1", "1s") // an error of sluice's
		conn.doAll(before)
		conn.doAll(after)
		info := conn.do("INFO", "stats")
		for f, v := range wantStats {
			if got := infoField(t, info, f); got != v {
				t.Errorf("%s:%s, the node %s", f, got, v)
			}
		}
		if got := infoField(t, info, "throttle_allowed"); got != "0" {
			t.Errorf("throttle_allowed:%s after RESETSTAT", got)
		}
		if got := commandstats(t, conn); !equalCounts(got, want) {
			t.Errorf("commandstats %v, the node %v", got, want)
		}
		if got := errorstats(t, conn); len(got) != 0 {
			t.Errorf("errorstats %v after RESETSTAT", got)
		}
		// Prometheus's counters never go back: RESETSTAT leaves them.
		text := scrape(t, srv)
		for _, want := range []string{`sluice_passthrough_commands_total{command="set"} 1`, `sluice_passthrough_commands_total{command="lpush"} 1`} {
			if !strings.Contains(text, want) {
				t.Errorf("after RESETSTAT, metrics lack %q", want)
			}
		}
		lat := conn.do("INFO", "latencystats")
		if strings.Contains(lat, "_set:") || strings.Contains(lat, "_throttle:") || !strings.Contains(lat, "_get:") {
			t.Errorf("latencystats after RESETSTAT:\n%s", lat)
		}

		// Pipelined: the GET sent before RESETSTAT counts before it, the
		// GET after it after, whenever their answers come.
		p := dialRaw(t, addr)
		p.send([]string{"GET", key}, []string{"CONFIG", "RESETSTAT"}, []string{"GET", key})
		if got := []string{p.read(), p.read(), p.read()}; got[1] != "+OK\r\n" {
			t.Fatalf("the pipeline answered %q", got)
		}
		if cs := commandstats(t, p); cs["get"] != (callCounts{1, 0, 0}) || cs["config|resetstat"] != (callCounts{1, 0, 0}) {
			t.Errorf("after a pipelined RESETSTAT: %v", cs)
		}
	})
}

// What a client pipelines after CONFIG RESETSTAT counts after it, as on a
// node, also what sluice answers at once (a PING, a GET refused for its
// arity, an INFO) or decides (a THROTTLE) before the primaries answer the
// RESETSTAT: a pipelined INFO shows the counts reset.
func TestConfigResetstatPipelinedAfter(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	pipeline := [][]string{{"CONFIG", "RESETSTAT"}, {"PING"}, {"GET"}, {"INFO", "stats"}}
	direct := dialRaw(t, c.Nodes[0].Addr)
	direct.do("GET") // an error before
	direct.send(pipeline...)
	var info string
	for range pipeline {
		info = direct.read()
	}
	wantErrors := infoField(t, info, "total_error_replies")
	want, wantErrstats := commandstats(t, direct), errorstats(t, direct)

	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster", AllowAdmin: true}, func(t *testing.T, cfg proxy.Config) {
		_, addr := serveServer(t, cfg)
		conn := dialRaw(t, addr)
		conn.do("GET")
		conn.send(append(pipeline, []string{"THROTTLE", "rsp", "5", "1", "1s"})...)
		var got []string
		for range len(pipeline) + 1 {
			got = append(got, conn.read())
		}
		if !strings.HasPrefix(got[0], "+OK") || !strings.HasPrefix(got[4], "*") {
			t.Fatalf("the pipeline answered %q", got)
		}
		if e := infoField(t, got[3], "total_error_replies"); e != wantErrors {
			t.Errorf("a pipelined INFO: total_error_replies:%s, the node %s", e, wantErrors)
		}
		// THROTTLE is sluice's, not the node's.
		cs, es := commandstats(t, conn), errorstats(t, conn)
		if cs["throttle"] != (callCounts{1, 0, 0}) {
			t.Errorf("throttle %v after RESETSTAT", cs["throttle"])
		}
		delete(cs, "throttle")
		if !equalCounts(cs, want) {
			t.Errorf("commandstats %v, the node %v", cs, want)
		}
		if len(es) != len(wantErrstats) || es["ERR"] != wantErrstats["ERR"] {
			t.Errorf("errorstats %v, the node %v", es, wantErrstats)
		}
		if a := infoField(t, conn.do("INFO", "stats"), "throttle_allowed"); a != "1" {
			t.Errorf("throttle_allowed:%s, the THROTTLE after RESETSTAT not counted", a)
		}
	})
}
