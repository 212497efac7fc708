package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A RESP3 subscriber that publishes a message of its own channel, then
// ends its side (shutdown write), is pushed the message before it is
// closed, as Redis pushes what it made before it reads the client's EOF.
// Made certain: the client's channels live on node P (its first
// channel's), the channel it publishes on another (the PUBLISH goes
// there, answered at once, the message reaching P over the cluster bus);
// P is paused until sluice has read the EOF. On the loops the client was
// closed then, all it sent answered, and the message lost. Both serving
// paths, against a lone redis-server's bytes (the cluster's PUBLISH
// counts only its node's receivers, :0 for :1, and the message comes
// after its reply).
func TestPassthroughPublishBeforeEOFIsDelivered(t *testing.T) {
	// A long node timeout: the others keep their links to P, paused.
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	r := newForwarding(t, c)
	// a on P, b elsewhere.
	a := "{peofa}"
	p := primaryOf(t, c, a)
	b := ""
	for i := 0; b == ""; i++ {
		if k := "{peofb" + strconv.Itoa(i) + "}"; primaryOf(t, c, k) != p {
			b = k
		}
	}
	info, _ := p.Do(context.Background(), "INFO", "server").ToString()
	_, pid, _ := strings.Cut(info, "process_id:")
	pid, _, _ = strings.Cut(pid, "\r\n")
	_, ps, _ := net.SplitHostPort(p.Addr)
	pport, _ := strconv.Atoi(ps)
	cmds := [][]string{{"PUBLISH", b, "hi"}, {"PING"}}
	// The bus message carrying it (Redis 7's clusterSendPublish): a
	// header of 2256 bytes, the lengths, the channel and the message. The
	// bus's other messages (PING, PONG, FAIL, UPDATE) are a multiple of
	// 8 long, this one not, so a ping that came meanwhile is told apart.
	publishLen := 2256 + 8 + len(b) + len("hi")
	if publishLen%8 == 0 {
		t.Fatalf("channel %q: its bus message is not told apart", b)
	}
	run := func(addr string, paused bool) string {
		conn := dialRaw(t, addr)
		conn.do("HELLO", "3")
		conn.send([]string{"SUBSCRIBE", a, b})
		got := conn.read() + conn.read()
		if paused {
			if err := p.Pause(); err != nil {
				t.Fatal(err)
			}
			defer p.Resume()
			// Stopped, so that what its sockets hold only grows.
			waitUntil(t, "P stops", func() bool {
				b, err := os.ReadFile("/proc/" + pid + "/stat")
				if err != nil {
					t.Fatal(err)
				}
				f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
				return len(f) > 0 && f[0] == "T"
			})
		}
		bus := busHolds(t, pport+10000)
		conn.send(cmds...)
		if paused {
			// Answered (by the other node, and sluice), and the message
			// on its way to P, as the bus carries it: in P's socket
			// before sluice's fence is.
			got += conn.read() + conn.read()
			waitUntil(t, "the message reaches P", func() bool {
				d := busHolds(t, pport+10000) - bus
				return d > 0 && d%8 == publishLen%8
			})
		}
		if err := conn.c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if paused {
			_, sp, _ := net.SplitHostPort(addr)
			sport, _ := strconv.Atoi(sp)
			cport := conn.c.LocalAddr().(*net.TCPAddr).Port
			// Read by sluice: its side of the client's connection gone
			// (closed), or the fence waiting in P's socket: the PING,
			// and the tunnel's own after it, PING sluice-fence-<24 hex
			// digits>. (Waiting for the PING alone waited for another
			// connection to P to be sent as many bytes, a second on.)
			waitUntil(t, "sluice reads the client's EOF", func() bool {
				return !hasSocket(t, sport, cport) ||
					nodeHolds(t, pport, "01", len("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nPING\r\n$37\r\n\r\n")+37)
			})
			if err := p.Resume(); err != nil {
				t.Fatal(err)
			}
		}
		out, err := io.ReadAll(conn.br)
		if err != nil {
			out = append(out, " (read: "+err.Error()+")"...)
		}
		got += string(out)
		return strings.ReplaceAll(got, ":0\r\n", ":1\r\n")
	}
	want := run(startRedis(t), false)
	// The message, pushed before PUBLISH's reply by one node, comes after
	// it from another.
	message := fmt.Sprintf(">3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$2\r\nhi\r\n", len(b), b)
	if !strings.Contains(want, message) {
		t.Fatalf("redis-server: %q", want)
	}
	want = strings.Replace(want, message, "", 1) + message
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		for i := range 3 {
			if got := run(addr, true); got != want {
				t.Errorf("loops %d, try %d:\n got %q\nwant %q", loops, i, got, want)
				break
			}
		}
	}
}

// hasSocket reports whether a TCP socket of local port port to remote
// port peer is open (in any state but TIME_WAIT).
func hasSocket(t *testing.T, port, peer int) bool {
	t.Helper()
	for _, s := range tcpSockets(t, false) {
		if s.state != "06" && s.local == port && s.remote == peer {
			return true
		}
	}
	return false
}

// busHolds is how many bytes the sockets of local port port hold unread.
func busHolds(t *testing.T, port int) int {
	t.Helper()
	n := 0
	for _, s := range tcpSockets(t, false) {
		if s.state == "01" && s.local == port {
			n += s.rx
		}
	}
	return n
}
