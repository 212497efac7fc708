package proxy_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// After HELLO 3 sluice's own replies take RESP3's types where Redis 7's
// do, and HELLO 2 switches back.
func TestRESP3Replies(t *testing.T) {
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops}))
		for _, step := range []struct {
			cmd    []string
			prefix string
		}{
			{[]string{"CLIENT", "GETNAME"}, "$-1\r\n"},
			{[]string{"HELLO", "3"}, "%7\r\n$6\r\nserver\r\n$6\r\nsluice\r\n"},
			{[]string{"CLIENT", "GETNAME"}, "_\r\n"},
			{[]string{"INFO", "server"}, "="},
			{[]string{"CLIENT", "INFO"}, "="},
			{[]string{"CLUSTER", "INFO"}, "="},
			{[]string{"CLUSTER", "NODES"}, "="},
			{[]string{"CLUSTER", "SHARDS"}, "*1\r\n%2\r\n$5\r\nslots\r\n"},
			{[]string{"CLUSTER", "SLOTS"}, "*1\r\n*3\r\n:0\r\n:16383\r\n"},
			{[]string{"COMMAND", "INFO", "throttle"}, "*1\r\n*10\r\n$8\r\nthrottle\r\n:-2\r\n~2\r\n"},
			{[]string{"COMMAND", "DOCS", "throttle"}, "%1\r\n$8\r\nthrottle\r\n%5\r\n"},
			{[]string{"THROTTLE", "r3", "5", "1", "1s"}, "*5\r\n:0\r\n:5\r\n:4\r\n:-1\r\n"},
			{[]string{"HELLO", "2"}, "*14\r\n"},
			{[]string{"CLIENT", "GETNAME"}, "$-1\r\n"},
			{[]string{"INFO", "server"}, "$"},
			{[]string{"HELLO", "4"}, "-NOPROTO"},
		} {
			if got := conn.do(step.cmd...); !strings.HasPrefix(got, step.prefix) {
				t.Errorf("loops %d, %q: got %q, want it to begin %q", loops, step.cmd, got[:min(len(got), 60)], step.prefix)
			}
		}
	}
}

// HELLO's version is an integer as Redis reads one: "03" is refused, not
// taken as 3 and then answered as RESP2, and "-0" and "-02" are not
// answered NOPROTO as 0 and -2 would be.
func TestHelloVersionAsRedisReadsIt(t *testing.T) {
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0)}))
	for _, v := range []string{"03", "002", "-0", "-02", "-"} {
		if got := conn.do("HELLO", v); got != "-ERR Protocol version is not an integer or out of range\r\n" {
			t.Errorf("HELLO %s: %q, want Redis's error", v, got[:min(len(got), 60)])
		}
	}
	if got := conn.do("HELLO", "3"); !strings.HasPrefix(got, "%7\r\n") {
		t.Errorf("HELLO 3: %q", got[:min(len(got), 60)])
	}
}

// COMMAND DOCS and COMMAND INFO describe every bucket command as Redis 7
// describes its own (GCRA as Redis 8.8's gcra.json), in RESP2 and RESP3,
// and COMMAND GETKEYS finds their key.
func TestCommandDocsAndKeySpecs(t *testing.T) {
	for _, resp3 := range []bool{false, true} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0)}))
		m, set := func(n int) string { return "*" + strconv.Itoa(2*n) + "\r\n" }, "*"
		if resp3 {
			conn.do("HELLO", "3")
			m, set = func(n int) string { return "%" + strconv.Itoa(n) + "\r\n" }, "~"
		}
		bulk := func(ss ...string) string {
			var b strings.Builder
			for _, s := range ss {
				fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(s), s)
			}
			return b.String()
		}
		key := m(3) + bulk("name", "key", "type", "key", "key_spec_index") + ":0\r\n"
		arg := func(name, typ string) string { return m(2) + bulk("name", name, "type", typ) }
		docs := func(name, summary, since string, args ...string) string {
			return bulk(name) + m(5) + bulk("summary", summary, "since", since, "group", "rate_limit", "complexity", "O(1)", "arguments") +
				"*" + strconv.Itoa(len(args)) + "\r\n" + strings.Join(args, "")
		}
		gcra := docs("gcra", "Rate limit via GCRA (Generic Cell Rate Algorithm).", "8.8.0", key,
			arg("max-burst", "integer"), arg("tokens-per-period", "integer"), arg("period", "double"),
			m(4)+bulk("name", "count", "type", "integer", "token", "TOKENS", "flags")+set+"1\r\n+optional\r\n")
		if got := conn.do("COMMAND", "DOCS", "gcra"); got != m(1)+gcra {
			t.Errorf("RESP3 %v: COMMAND DOCS gcra:\n got %q\nwant %q", resp3, got, m(1)+gcra)
		}
		cell := docs("cl.throttle", "Rate limit via redis-cell's GCRA: takes quantity tokens from a bucket of max_burst+1, refilled count_per_period every period seconds", "1.0.0",
			key, arg("max_burst", "integer"), arg("count_per_period", "integer"), arg("period", "integer"),
			m(3)+bulk("name", "quantity", "type", "integer", "flags")+set+"1\r\n+optional\r\n")
		if got := conn.do("COMMAND", "DOCS", "CL.THROTTLE"); got != m(1)+cell {
			t.Errorf("RESP3 %v: COMMAND DOCS CL.THROTTLE:\n got %q\nwant %q", resp3, got, m(1)+cell)
		}
		reset := docs("throttle.reset", "Deletes key's bucket, which is full again at its next decision", "1.0.0", key)
		if got := conn.do("COMMAND", "DOCS", "throttle.reset"); got != m(1)+reset {
			t.Errorf("RESP3 %v: COMMAND DOCS throttle.reset:\n got %q\nwant %q", resp3, got, m(1)+reset)
		}
		if got := conn.do("COMMAND", "DOCS", "throttle"); !strings.HasPrefix(got, m(1)+bulk("throttle")+m(5)+bulk("summary")) || !strings.Contains(got, key) {
			t.Errorf("RESP3 %v: COMMAND DOCS throttle: %q", resp3, got)
		}

		// The key spec, as Redis 7.0.15 gives INCR's (DEL's for
		// THROTTLE.RESET).
		spec := func(flags ...string) string {
			s := set + "1\r\n" + m(3) + bulk("flags") + set + strconv.Itoa(len(flags)) + "\r\n"
			for _, f := range flags {
				s += "+" + f + "\r\n"
			}
			return s + bulk("begin_search") + m(2) + bulk("type", "index", "spec") + m(1) + bulk("index") + ":1\r\n" +
				bulk("find_keys") + m(2) + bulk("type", "range", "spec") + m(3) + bulk("lastkey") + ":0\r\n" +
				bulk("keystep") + ":1\r\n" + bulk("limit") + ":0\r\n" + set + "0\r\n"
		}
		for name, flags := range map[string][]string{"gcra": {"RW", "access", "update"}, "cl.throttle": {"RW", "access", "update"},
			"throttle": {"RW", "access", "update"}, "throttle.reset": {"RM", "delete"}} {
			if got := conn.do("COMMAND", "INFO", name); !strings.HasPrefix(got, "*1\r\n*10\r\n"+bulk(name)) || !strings.HasSuffix(got, set+"0\r\n"+spec(flags...)) {
				t.Errorf("RESP3 %v: COMMAND INFO %s: %q, want its key spec %q", resp3, name, got, spec(flags...))
			}
		}
		if got := conn.do("COMMAND", "INFO", "ping"); !strings.HasSuffix(got, set+"0\r\n"+set+"0\r\n"+set+"0\r\n") {
			t.Errorf("RESP3 %v: COMMAND INFO ping: %q, want no key spec", resp3, got)
		}

		// COMMAND GETKEYS, as Redis 7.0.15 answers it for its own.
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"GCRA", "k", "1", "1", "1"}, "*1\r\n$1\r\nk\r\n"},
			{[]string{"cl.throttle", "u", "1", "1", "1", "2"}, "*1\r\n$1\r\nu\r\n"},
			{[]string{"THROTTLE", "t"}, "*1\r\n$1\r\nt\r\n"},
			{[]string{"GCRA", "k", "1", "1"}, "-ERR Invalid number of arguments specified for command\r\n"},
			{[]string{"throttle.reset", "k", "x"}, "-ERR Invalid number of arguments specified for command\r\n"},
			{[]string{"ping", "x"}, "-ERR The command has no key arguments\r\n"},
			{[]string{"nope", "x"}, "-ERR Invalid command specified\r\n"},
			{[]string{"gcra"}, "-ERR wrong number of arguments for 'command|getkeys' command\r\n"},
		} {
			if got := conn.do(append([]string{"COMMAND", "GETKEYS"}, c.args...)...); got != c.want {
				t.Errorf("RESP3 %v: COMMAND GETKEYS %q: %q, want %q", resp3, c.args, got, c.want)
			}
		}
		want := "*1\r\n*2\r\n$1\r\nr\r\n" + set + "2\r\n+RM\r\n+delete\r\n"
		if got := conn.do("COMMAND", "GETKEYSANDFLAGS", "THROTTLE.RESET", "r"); got != want {
			t.Errorf("RESP3 %v: COMMAND GETKEYSANDFLAGS THROTTLE.RESET r: %q, want %q", resp3, got, want)
		}
	}
}

// A command pipelined after a HELLO that switches the protocol goes on
// another of sluice's connections to the node than the ones before it,
// yet it runs after them, as on one connection to the node: an INCR and
// then, in the other protocol, a GET of its key sees the increment, and
// the replies are the node's bytes.
func TestHelloSwitchKeepsPipelineOrder(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		through := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		for i := range 10 {
			key := fmt.Sprintf("hs:%d:%d", loops, i)
			pipeline := func(k string) [][]string {
				return [][]string{{"INCR", k}, {"HELLO", "3"}, {"GET", k}, {"INCR", k}, {"HELLO", "2"}, {"GET", k}, {"INCR", k}, {"HELLO", "3"}, {"GET", k}}
			}
			straight := dialRaw(t, primaryOf(t, c, "{"+key+"}d").Addr)
			through.send(pipeline("{" + key + "}s")...)
			straight.send(pipeline("{" + key + "}d")...)
			var got, want []string
			for _, cmd := range pipeline(key) {
				g, w := through.read(), straight.read()
				if cmd[0] != "HELLO" { // HELLO's reply is sluice's own
					got, want = append(got, g), append(want, w)
				}
			}
			likeTheNode(t, fmt.Sprintf("loops %d, pipeline %d: ", loops, i), got, want)
			through.do("HELLO", "2")
		}
	}
}

// RESET, as HELLO 2, takes a RESP3 client back to RESP2: the commands
// after it go on sluice's RESP2 connections, and must not run before
// those still in flight on the RESP3 ones. An INCRBY, RESET, INCR of one
// key, pipelined, ran the INCR first every time on the goroutine path
// (and now and then on a loop): the INCRBY answered 3, not 2.
func TestResetToRESP2KeepsTheOrder(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		for i := range 50 {
			k := "rr" + strconv.Itoa(cfg.Loops) + ":" + strconv.Itoa(i)
			conn := dialRaw(t, addr)
			conn.send([]string{"HELLO", "3"}, []string{"INCRBY", k, "2"}, []string{"RESET"}, []string{"INCR", k})
			conn.read() // HELLO's map
			if got := conn.read() + conn.read() + conn.read(); got != ":2\r\n+RESET\r\n:3\r\n" {
				t.Fatalf("try %d: INCRBY, RESET, INCR: %q", i, got)
			}
			conn.c.Close()
		}
	})
}
