package proxy_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// CLIENT KILL ends sluice's own clients as a node ends its own: the same
// replies for the same steps, errors in Redis 7.0's order and words, the
// old form (an address: OK, "No such client", the caller itself) and the
// filters, which all must match (ID, ADDR, LADDR, TYPE, USER, SKIPME).
// A killed client's connection is closed, a blocked one's wait at its
// node ended; on both serving paths.
func TestClientKillAsRedis(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	node := primaryOf(t, c, "{kill}k")
	run := func(t *testing.T, addr string) []string {
		var got []string
		admin := dialRaw(t, addr)
		for _, cmd := range []string{
			"CLIENT KILL", "CLIENT KILL ID 0", "CLIENT KILL ID x", "CLIENT KILL ID -1", "CLIENT KILL TYPE bogus",
			"CLIENT KILL USER nosuch", "CLIENT KILL SKIPME maybe", "CLIENT KILL BOGUS x", "CLIENT KILL ID 5 SKIPME",
			"CLIENT KILL ID 1 TYPE bogus", "CLIENT KILL TYPE bogus ID 0", "CLIENT KILL 127.0.0.1:1",
			"CLIENT KILL TYPE master", "CLIENT KILL TYPE replica", "CLIENT KILL ID 99999999",
		} {
			got = append(got, cmd+" -> "+admin.do(strings.Fields(cmd)...))
		}
		idOf := func(rc *rawConn) string {
			return strings.TrimSuffix(strings.TrimPrefix(rc.do("CLIENT", "ID"), ":"), "\r\n")
		}
		ended := func(what string, rc *rawConn) {
			t.Helper()
			if !closedByServer(rc) {
				t.Errorf("%s: %s's connection is still open", addr, what)
			}
			got = append(got, what+" closed")
		}
		v := dialRaw(t, addr)
		id := idOf(v)
		got = append(got, "LADDR other -> "+admin.do("CLIENT", "KILL", "LADDR", "127.0.0.1:1", "ID", id))
		got = append(got, "USER default, ID -> "+admin.do("CLIENT", "KILL", "USER", "default", "LADDR", addr, "ID", id))
		ended("by ID", v)
		waitUntil(t, "the killed client leaves CLIENT LIST", func() bool { return clientLine(t, admin.do("CLIENT", "LIST", "ID", id)) == "" })
		v = dialRaw(t, addr)
		v.do("PING") // accepted: a connection not yet accepted is no client
		got = append(got, "old form -> "+admin.do("CLIENT", "KILL", v.c.LocalAddr().String()))
		ended("by address", v)
		v = dialRaw(t, addr)
		v.do("SUBSCRIBE", "kill:ch")
		got = append(got, "TYPE pubsub, ADDR -> "+admin.do("CLIENT", "KILL", "TYPE", "pubsub", "ADDR", v.c.LocalAddr().String()))
		ended("a subscriber", v)
		v = dialRaw(t, addr)
		id = idOf(v)
		v.send([]string{"BLPOP", "{kill}k", "0"})
		waitUntil(t, "the client blocks", func() bool { return strings.Contains(clientLine(t, admin.do("CLIENT", "LIST", "ID", id)), " flags=b ") })
		got = append(got, "blocked -> "+admin.do("CLIENT", "KILL", "ID", id))
		ended("a blocked client", v)
		waitUntil(t, "no client waits at the node", func() bool {
			return strings.Contains(direct(t, c, -1, "INFO", "clients"), "blocked_clients:0\r")
		})
		self := dialRaw(t, addr)
		got = append(got, "SKIPME yes -> "+self.do("CLIENT", "KILL", "ID", idOf(self)))
		got = append(got, "SKIPME no -> "+self.do("CLIENT", "KILL", "ID", idOf(self), "SKIPME", "no"))
		ended("the caller, SKIPME no", self)
		self = dialRaw(t, addr)
		got = append(got, "itself, old form -> "+self.do("CLIENT", "KILL", self.c.LocalAddr().String()))
		ended("the caller, old form", self)
		got = append(got, "the admin -> "+admin.do("PING"))
		return got
	}
	sameStepsAsNode(t, r, node.Addr, run)
}

// sameStepsAsNode runs steps against a node at nodeAddr, then through a
// sluice on r on each serving path, and fails on the first difference of
// each path.
func sameStepsAsNode(t *testing.T, r *router.Cluster, nodeAddr string, steps func(t *testing.T, addr string) []string) {
	t.Helper()
	want := steps(t, nodeAddr)
	for _, loops := range []int{0, -1} {
		got := steps(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		for i := range max(len(got), len(want)) {
			if i >= len(got) || i >= len(want) || got[i] != want[i] {
				t.Errorf("loops %d: step %d through sluice %q, the node's %q", loops, i, at(got, i), at(want, i))
				break
			}
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

// closedByServer reports whether the server closed rc, within a few
// seconds: a read finds the end of the stream or a reset.
func closedByServer(rc *rawConn) bool {
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, err := rc.br.ReadByte()
		if err == nil {
			continue // a reply or message sent before the close
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false
		}
		return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
	}
}

// CLIENT UNBLOCK ends a sluice client's blocking command as a node ends
// its own client's: answered its timeout's reply (a null array, BLMOVE's
// null, RESP3's null) or UNBLOCKED, the client served on, 0 for one that
// does not wait; its wait at the node ended with it. On both serving
// paths, step by step against a node.
func TestClientUnblockAsRedis(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	node := primaryOf(t, c, "{ub}k")
	run := func(t *testing.T, addr string) []string {
		var got []string
		admin := dialRaw(t, addr)
		for _, cmd := range []string{"CLIENT UNBLOCK", "CLIENT UNBLOCK x", "CLIENT UNBLOCK 1 bogus", "CLIENT UNBLOCK x bogus",
			"CLIENT UNBLOCK 1 timeout x", "CLIENT UNBLOCK 99999", "CLIENT UNBLOCK 99999 ERROR"} {
			got = append(got, cmd+" -> "+admin.do(strings.Fields(cmd)...))
		}
		v := dialRaw(t, addr)
		id := strings.TrimSuffix(strings.TrimPrefix(v.do("CLIENT", "ID"), ":"), "\r\n")
		got = append(got, "idle -> "+admin.do("CLIENT", "UNBLOCK", id))
		for _, tc := range []struct {
			hello string
			cmd   []string
			how   []string
		}{
			{"2", []string{"BLPOP", "{ub}k", "0"}, nil},
			{"2", []string{"BLMOVE", "{ub}a", "{ub}b", "LEFT", "LEFT", "0"}, []string{"TIMEOUT"}},
			{"2", []string{"XREAD", "BLOCK", "0", "STREAMS", "{ub}s", "$"}, []string{"timeout"}},
			{"2", []string{"BZPOPMIN", "{ub}z", "0"}, []string{"ERROR"}},
			{"3", []string{"BLPOP", "{ub}k", "0"}, nil},
			{"3", []string{"BLMOVE", "{ub}a", "{ub}b", "LEFT", "LEFT", "0"}, []string{"error"}},
		} {
			v.do("HELLO", tc.hello)
			v.send(tc.cmd)
			waitUntil(t, "the client blocks", func() bool { return strings.Contains(clientLine(t, admin.do("CLIENT", "LIST", "ID", id)), " flags=b ") })
			got = append(got, fmt.Sprintf("RESP%s %q %v -> %s", tc.hello, tc.cmd, tc.how, admin.do(append([]string{"CLIENT", "UNBLOCK", id}, tc.how...)...)))
			got = append(got, "its reply "+v.read(), "then "+v.do("PING"))
		}
		waitUntil(t, "no client waits at the node", func() bool {
			return strings.Contains(direct(t, c, -1, "INFO", "clients"), "blocked_clients:0\r")
		})
		return got
	}
	sameStepsAsNode(t, r, node.Addr, run)
}
