package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A keyless command that reads or changes a node's own state (LASTSAVE,
// MEMORY STATS, ...) is refused outside a transaction: no one
// primary's answer is the cluster's. Inside MULTI sluice queued it, and
// EXEC answered the state of whichever primary the transaction reached.
// It aborts the transaction now, as any command sluice refuses.
func TestServerwideKeylessRefusedInMulti(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	const abort = "-EXECABORT Transaction discarded because of previous errors.\r\n"
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		for _, cmd := range []string{"LASTSAVE", "MEMORY STATS", "MEMORY DOCTOR", "MEMORY MALLOC-STATS", "MEMORY PURGE"} {
			args := strings.Fields(cmd)
			want := "-ERR sluice does not forward '" + strings.ToLower(strings.ReplaceAll(cmd, " ", "|")) + "': it has no key to route by\r\n"
			if got := conn.do(args...); got != want {
				t.Fatalf("loops %d: %s: %q, want %q", loops, cmd, got, want)
			}
			for _, before := range [][]string{nil, {"SET", "{sw}k", "1"}} {
				conn.send([]string{"MULTI"})
				if before != nil {
					conn.send(before)
				}
				conn.send(args, []string{"EXEC"})
				got := []string{conn.read()}
				if before != nil {
					got = append(got, conn.read())
				}
				got = append(got, conn.read(), conn.read())
				if got[len(got)-2] != want || got[len(got)-1] != abort {
					for i := range got {
						got[i] = got[i][:min(len(got[i]), 80)]
					}
					t.Errorf("loops %d: MULTI %q %s EXEC: %q, want %q then %q", loops, before, cmd, got, want, abort)
				}
			}
		}
		// The transaction's own UNWATCH, and keyless commands any primary
		// answers alike, are still queued.
		conn.send([]string{"MULTI"}, []string{"UNWATCH"}, []string{"ECHO", "x"}, []string{"OBJECT", "HELP"}, []string{"EXEC"})
		for i, want := range []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n"} {
			if got := conn.read(); got != want {
				t.Errorf("loops %d: MULTI UNWATCH ECHO OBJECT HELP EXEC: reply %d %q, want %q", loops, i, got, want)
			}
		}
		if got := conn.read(); !strings.HasPrefix(got, "*3\r\n+OK\r\n$1\r\nx\r\n*") {
			t.Errorf("loops %d: EXEC: %q, want UNWATCH's, ECHO's and OBJECT HELP's replies", loops, got)
		}
	}
	t.Run("ROLE", func(t *testing.T) { roleIsSluicesOwn(t, c, r) })
}

// ROLE answers for sluice itself, as INFO's replication section and
// CLUSTER SHARDS do: a master at offset 0 with no replicas, in the shape
// of a primary's ROLE (its role, its offset, its replicas), in both
// protocols, on the embedded backend too. It was refused, having no key
// to route by, and clients that find their primary by ROLE could not
// start.
func roleIsSluicesOwn(t *testing.T, c *clustertest.Cluster, r *router.Cluster) {
	if node := direct(t, c, -1, "ROLE"); !strings.HasPrefix(node, "*3\r\n$6\r\nmaster\r\n:") || !strings.HasSuffix(node, "\r\n*0\r\n") {
		t.Fatalf("ROLE on a primary without replicas: %q", node)
	}
	for _, addr := range []string{serveConfig(t, proxy.Config{Decider: r, Forwarder: r}), serveConfig(t, proxy.Config{Decider: router.NewMemory(0)})} {
		conn := dialRaw(t, addr)
		for _, proto := range []string{"2", "3"} {
			conn.do("HELLO", proto)
			if got := conn.do("ROLE"); got != "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n" {
				t.Errorf("%s RESP%s: ROLE %q, want a master at offset 0 without replicas", addr, proto, got)
			}
		}
		if got := conn.do("INFO", "replication"); !strings.Contains(got, "role:master\r\nconnected_slaves:0\r\n") {
			t.Errorf("%s: INFO replication %q, not what ROLE says", addr, got)
		}
	}
}
