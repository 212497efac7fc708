package proxy_test

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A keyless command that may write (EVAL, EVALSHA or FCALL without keys),
// sent right after a failover before sluice has read the new slot map,
// runs on the promoted primary, not on its old primary, now a replica,
// which answers READONLY: it is checked as a fan-out's part is, and sent
// again. A keyless read (EVAL_RO, FCALL_RO) is not checked: the replica
// answers it, and sluice learns nothing from it. A READONLY that reaches
// a client all the same (a keyless transaction's: EXEC answers EXECABORT,
// or an array of its script's error) makes sluice read the slot map at
// once. One primary, so that every keyless command meets the failover;
// one failover for every case and both paths: each case's sluice has its
// own router, made before it, which learns of it only from its own
// commands.
func TestKeylessWritesRightAfterAFailover(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1})
	const key = "keylessfail"
	old := primaryOf(t, c, key)
	lib := "#!lua name=keylessfail\n" +
		"redis.register_function('kl_set', function(keys, args) return redis.call('SET', args[1], args[2]) end)\n" +
		"redis.register_function{function_name='kl_ro', callback=function(keys, args) return 'ro' end, flags={'no-writes'}}\n"
	if got, err := nodeDo(old, "FUNCTION", "LOAD", lib); got != "$11\r\nkeylessfail\r\n" {
		t.Fatalf("FUNCTION LOAD: %q %v", got, err)
	}
	const setScript = "return redis.call('SET', ARGV[1], ARGV[2])"
	sum := sha1.Sum([]byte(setScript))
	sha := hex.EncodeToString(sum[:])
	for _, n := range c.Nodes {
		if got, err := nodeDo(n, "SCRIPT", "LOAD", setScript); got != "$40\r\n"+sha+"\r\n" {
			t.Fatalf("SCRIPT LOAD on %s: %q %v", n.Addr, got, err)
		}
	}
	type path struct {
		name  string
		loops int
	}
	paths := []path{{"loops", 0}, {"goroutines", -1}}
	unseen := func(t *testing.T, r *router.Cluster, promoted *clustertest.Node) {
		t.Helper()
		for _, s := range r.Stats().Cluster.Shards {
			if s.Addr == promoted.Addr {
				t.Fatalf("sluice read the slot map already: the test cannot tell")
			}
		}
	}
	seen := func(r *router.Cluster, promoted *clustertest.Node) bool {
		for _, s := range r.Stats().Cluster.Shards {
			if s.Addr == promoted.Addr {
				return true
			}
		}
		return false
	}
	cases := []struct {
		name string
		run  func(t *testing.T, p path, r *router.Cluster, conn *rawConn, promoted *clustertest.Node)
	}{
		{"reads unchecked, then writes checked", func(t *testing.T, p path, r *router.Cluster, conn *rawConn, promoted *clustertest.Node) {
			// EXISTS refused MOVED counts in its rejected_calls.
			checks := func() string {
				info, _ := nodeDo(old, "INFO", "commandstats")
				_, v, _ := strings.Cut(info, "cmdstat_exists:")
				v, _, _ = strings.Cut(v, "\r\n")
				return v
			}
			before := checks()
			conn.send([]string{"EVAL_RO", "return 'ro'", "0"}, []string{"FCALL_RO", "kl_ro", "0"}, []string{"EVAL", "#!lua flags=no-writes\nreturn 'ro'", "0"})
			for i := range 3 {
				if got := conn.read(); got != "$2\r\nro\r\n" {
					t.Errorf("keyless read %d: %q, want ro", i, got)
				}
			}
			// A read sent to the replica is answered there, and costs no
			// check (whose MOVED would have the slot map read).
			if after := checks(); after != before {
				t.Errorf("the old primary's EXISTS went from %q to %q: a keyless read was checked", before, after)
			}
			unseen(t, r, promoted)
			pre := "{" + key + "}" + p.name
			conn.send(
				[]string{"FCALL", "kl_set", "0", pre + "a", "1"}, []string{"GET", pre + "a"},
				[]string{"EVAL", setScript, "0", pre + "b", "2"}, []string{"GET", pre + "b"},
				[]string{"EVALSHA", sha, "0", pre + "c", "3"}, []string{"GET", pre + "c"},
				[]string{"EVAL", "#!lua\nreturn 'w'", "0"})
			for i, want := range []string{"+OK\r\n", "$1\r\n1\r\n", "+OK\r\n", "$1\r\n2\r\n", "+OK\r\n", "$1\r\n3\r\n", "$1\r\nw\r\n"} {
				if got := conn.read(); got != want {
					t.Errorf("reply %d to FCALL, GET, EVAL, GET, EVALSHA, GET, EVAL: %q, want %q", i, got, want)
				}
			}
			for k, want := range map[string]string{"a": "1", "b": "2", "c": "3"} {
				if got := dialRaw(t, promoted.Addr).do("GET", pre+k); got != "$1\r\n"+want+"\r\n" {
					t.Errorf("GET %s on the promoted primary: %q, want %s", pre+k, got, want)
				}
			}
		}},
		{"a keyless transaction refused READONLY", func(t *testing.T, p path, r *router.Cluster, conn *rawConn, promoted *clustertest.Node) {
			k := "{" + key + "}tx" + p.name
			send := func() {
				conn.send([]string{"MULTI"}, []string{"FCALL", "kl_set", "0", k, "1"}, []string{"EXEC"})
				for i, want := range []string{"+OK\r\n", "+QUEUED\r\n"} {
					if got := conn.read(); got != want {
						t.Fatalf("reply %d to MULTI, FCALL: %q, want %q", i, got, want)
					}
				}
			}
			send()
			if got := conn.read(); !strings.HasPrefix(got, "-EXECABORT ") {
				t.Fatalf("EXEC on the old primary: %q, want EXECABORT (the test cannot tell)", got)
			}
			waitUntil(t, "sluice reads the slot map", func() bool { return seen(r, promoted) })
			send()
			if got := conn.read(); got != "*1\r\n+OK\r\n" {
				t.Errorf("EXEC again: %q, want [OK]", got)
			}
		}},
		{"a keyless transaction's script refused READONLY", func(t *testing.T, p path, r *router.Cluster, conn *rawConn, promoted *clustertest.Node) {
			k := "{" + key + "}txs" + p.name
			send := func() {
				conn.send([]string{"MULTI"}, []string{"EVAL", setScript, "0", k, "1"}, []string{"EXEC"})
				for i, want := range []string{"+OK\r\n", "+QUEUED\r\n"} {
					if got := conn.read(); got != want {
						t.Fatalf("reply %d to MULTI, EVAL: %q, want %q", i, got, want)
					}
				}
			}
			send()
			if got := conn.read(); !strings.HasPrefix(got, "*1\r\n-READONLY ") {
				t.Fatalf("EXEC on the old primary: %q, want [READONLY] (the test cannot tell)", got)
			}
			waitUntil(t, "sluice reads the slot map", func() bool { return seen(r, promoted) })
			send()
			if got := conn.read(); got != "*1\r\n+OK\r\n" {
				t.Errorf("EXEC again: %q, want [OK]", got)
			}
		}},
	}
	type setup struct {
		r    *router.Cluster
		conn *rawConn
	}
	setups := make(map[string]setup)
	for _, tc := range cases {
		for _, p := range paths {
			r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1,
				TopologyInterval: time.Hour})
			waitRouter(t, r)
			conn := dialRaw(t, serveConfig(t, proxy.Config{Loops: p.loops, Decider: r, Forwarder: r}))
			if got := conn.do("FCALL", "kl_set", "0", key, "before"); got != "+OK\r\n" {
				t.Fatalf("FCALL before the failover: %q", got)
			}
			setups[tc.name+"/"+p.name] = setup{r, conn}
		}
	}
	promoted := failOverUnseen(t, c, key)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range paths {
				t.Run(p.name, func(t *testing.T) {
					su := setups[tc.name+"/"+p.name]
					unseen(t, su.r, promoted)
					tc.run(t, p, su.r, su.conn, promoted)
				})
			}
		})
	}
}
