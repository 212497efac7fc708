package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// Every blocking command sluice forwards, in both protocols, with each of
// UNBLOCK's reasons, answered as a node answers it; and a client in MULTI,
// after WATCH, or subscribed (RESP3).
func TestReviewUnblockEveryCommand(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	node := primaryOf(t, c, "{ub}k")
	run := func(t *testing.T, addr string) []string {
		var got []string
		admin := dialRaw(t, addr)
		v := dialRaw(t, addr)
		id := strings.TrimSuffix(strings.TrimPrefix(v.do("CLIENT", "ID"), ":"), "\r\n")
		for _, cmd := range []string{"CLIENT UNBLOCK -5", "CLIENT UNBLOCK 99999999999999999999", "CLIENT UNBLOCK 0x10 error",
			"CLIENT unblock ID Timeout", "CLIENT UNBLOCK ID x"} {
			got = append(got, cmd+" -> "+admin.do(strings.Fields(strings.Replace(cmd, "ID", id, 1))...))
		}
		v.do("DEL", "{ub}g")
		got = append(got, "xgroup -> "+v.do("XGROUP", "CREATE", "{ub}g", "grp", "$", "MKSTREAM"))
		blocked := func() bool {
			_, flags, _ := strings.Cut(clientLine(t, admin.do("CLIENT", "LIST", "ID", id)), " flags=")
			flags, _, _ = strings.Cut(flags, " ")
			return strings.Contains(flags, "b")
		}
		for _, hello := range []string{"2", "3"} {
			for _, cmd := range [][]string{
				{"BLPOP", "{ub}k", "0"},
				{"BRPOP", "{ub}k", "0"},
				{"BRPOPLPUSH", "{ub}a", "{ub}b", "0"},
				{"BLMOVE", "{ub}a", "{ub}b", "LEFT", "RIGHT", "0"},
				{"BLMPOP", "0", "1", "{ub}k", "LEFT"},
				{"BZPOPMIN", "{ub}z", "0"},
				{"BZPOPMAX", "{ub}z", "0"},
				{"BZMPOP", "0", "1", "{ub}z", "MIN"},
				{"XREAD", "BLOCK", "0", "STREAMS", "{ub}s", "$"},
				{"XREADGROUP", "GROUP", "grp", "c1", "BLOCK", "0", "STREAMS", "{ub}g", ">"},
			} {
				for _, how := range [][]string{nil, {"TIMEOUT"}, {"ERROR"}} {
					v.do("HELLO", hello)
					v.send(cmd)
					waitUntil(t, "the client blocks", blocked)
					got = append(got, fmt.Sprintf("RESP%s %q %v -> %s", hello, cmd, how, admin.do(append([]string{"CLIENT", "UNBLOCK", id}, how...)...)))
					got = append(got, "its reply "+v.read(), "then "+v.do("PING"))
					got = append(got, "again -> "+admin.do("CLIENT", "UNBLOCK", id))
				}
			}
		}
		v.do("HELLO", "2")
		// In MULTI a blocking command is queued, and EXEC runs it without
		// waiting: the client never waits.
		v.do("MULTI")
		got = append(got, "queued "+v.do("BLPOP", "{ub}k", "0"))
		got = append(got, "in multi -> "+admin.do("CLIENT", "UNBLOCK", id))
		got = append(got, "exec "+v.do("EXEC"))
		// After WATCH.
		v.do("WATCH", "{ub}k")
		v.send([]string{"BLPOP", "{ub}k", "0"})
		waitUntil(t, "the client blocks", blocked)
		got = append(got, "watching -> "+admin.do("CLIENT", "UNBLOCK", id))
		got = append(got, "its reply "+v.read())
		v.do("MULTI")
		v.do("SET", "{ub}x", "1")
		got = append(got, "exec after "+v.do("EXEC"))
		// Subscribed, in RESP3.
		v.do("HELLO", "3")
		v.do("SUBSCRIBE", "{ub}ch")
		v.send([]string{"BLPOP", "{ub}k", "0"})
		waitUntil(t, "the client blocks", blocked)
		got = append(got, "subscribed -> "+admin.do("CLIENT", "UNBLOCK", id, "ERROR"))
		got = append(got, "its reply "+v.read(), "then "+v.do("PING"))
		waitUntil(t, "no client waits at the node", func() bool {
			return strings.Contains(direct(t, c, -1, "INFO", "clients"), "blocked_clients:0\r")
		})
		got = append(got, "info "+fmt.Sprint(strings.Contains(admin.do("INFO", "clients"), "blocked_clients:0\r")))
		return got
	}
	sameStepsAsNode(t, r, node.Addr, run)
}

// UNBLOCK ends an XREAD BLOCK's wait at its node and lets go of its place
// under --max-blocking (here 1): the next one waits; what the client
// pipelined behind it runs after it, in order.
func TestReviewUnblockFreesItsPlace(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	const key = "{ubr}s"
	primary := primaryOf(t, c, key)
	waits := func(n int) func() bool {
		return func() bool {
			s, _ := primary.Do(context.Background(), "INFO", "clients").ToString()
			return strings.Contains(s, fmt.Sprintf("blocked_clients:%d\r", n))
		}
	}
	for _, loops := range []int{1, -1} {
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), MaxBlocking: 1})
		waitRouter(t, r)
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		admin, v := dialRaw(t, addr), dialRaw(t, addr)
		id := strings.TrimSuffix(strings.TrimPrefix(v.do("CLIENT", "ID"), ":"), "\r\n")
		for i := range 3 {
			v.send([]string{"XREAD", "BLOCK", "0", "STREAMS", key, "$"}, []string{"ECHO", "a"}, []string{"ECHO", "b"})
			waitUntil(t, "it waits at the node", waits(1))
			if got := admin.do("CLIENT", "UNBLOCK", id, "ERROR"); got != ":1\r\n" {
				t.Fatalf("loops %d, %d: UNBLOCK %q", loops, i, got)
			}
			for _, want := range []string{"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n", "$1\r\na\r\n", "$1\r\nb\r\n"} {
				if got := v.read(); got != want {
					t.Fatalf("loops %d, %d: %q, want %q", loops, i, got, want)
				}
			}
			waitUntil(t, "no client waits at the node", waits(0))
		}
	}
}
