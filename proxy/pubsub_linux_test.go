package proxy_test

import (
	"bufio"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
)

// A subscriber that reads its messages, but stays some megabytes behind a
// steady flood, is kept as Redis keeps it: what counts against the 32 MiB
// of messages sluice holds for it is what waits, not what it was sent
// since it last caught up. The subscriber's receive buffer is small, so
// that most of its lag (16 MiB) waits in sluice, never written out all at
// once; then, in lockstep, the publisher adds a megabyte and the
// subscriber reads one, 24 times. On the event loops it was closed once
// 32 MiB had passed through (after 16 or so of those 24 steps). Both
// serving paths.
func TestPassthroughSubscriberThatKeepsUpIsNotClosed(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 256<<10)
			})
			if err != nil {
				return err
			}
			return serr
		}}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		sub := &rawConn{t: t, c: nc, br: bufio.NewReaderSize(nc, 64<<10)}
		ch := "lag:" + t.Name()
		// Straight to the channel's node, which sluice's subscription is
		// on: through sluice, forwarding the PUBLISHes took most of the
		// test's time.
		node := primaryOf(t, c, ch)
		pub := dialRaw(t, node.Addr)
		admin := dialRaw(t, node.Addr)
		// The node publishes faster than sluice reads: what sluice has
		// not read yet, the node and the socket between hold, not
		// sluice. taken waits until sluice holds it all: the node holds
		// nothing for sluice's subscription, its socket neither.
		omem := regexp.MustCompile(`addr=127\.0\.0\.1:(\d+) .* omem=(\d+) `)
		taken := func() {
			t.Helper()
			waitUntil(t, "sluice takes the messages", func() bool {
				// One: the last subtest's, closed, may not be gone yet.
				ms := omem.FindAllStringSubmatch(admin.do("CLIENT", "LIST", "TYPE", "pubsub"), -1)
				if len(ms) == 0 {
					t.Fatal("sluice's subscription is gone from the node")
				}
				if len(ms) != 1 || ms[0][2] != "0" {
					return false
				}
				m := ms[0]
				port, _ := strconv.Atoi(m[1])
				return nodeHolds(t, port, "01", 0) && socketSends(t, node.Addr, port) == 0
			})
		}
		if got := sub.do("SUBSCRIBE", ch); !strings.HasPrefix(got, "*3\r\n$9\r\nsubscribe\r\n") {
			t.Fatalf("SUBSCRIBE: %q", got)
		}
		payload := []byte(strings.Repeat("m", 64<<10))
		var mb []byte
		for range 16 { // a megabyte of messages
			mb = router.AppendCommand(mb, [][]byte{[]byte("PUBLISH"), []byte(ch), payload})
		}
		publish := func() {
			t.Helper()
			pub.c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := pub.c.Write(mb); err != nil {
				t.Fatal(err)
			}
			for range 16 {
				if got := pub.read(); got != ":1\r\n" {
					t.Fatalf("PUBLISH: %q", got)
				}
			}
		}
		var msg []byte
		readMB := func(i int) {
			t.Helper()
			sub.c.SetDeadline(time.Now().Add(10 * time.Second))
			for range 16 {
				if msg, err = reply.Read(sub.br, msg[:0]); err != nil {
					t.Fatalf("message, after %d MiB read: %v", i, err)
				}
				if !strings.HasPrefix(string(msg), "*3\r\n$7\r\nmessage\r\n") {
					t.Fatalf("message: %.60q", msg)
				}
			}
		}
		for range 16 {
			publish()
		}
		taken()
		const steps = 24 // 40 MiB through, 8 over the bound
		for i := range steps {
			publish()
			readMB(i)
		}
		taken()
		for i := range 16 {
			readMB(steps + i)
		}
		if got := sub.do("PING"); got != "*2\r\n$4\r\npong\r\n$0\r\n\r\n" {
			t.Fatalf("PING: %q", got)
		}
	})
}

// socketSends is how many bytes the established socket of addr to local
// port peer has sent that peer has not acknowledged yet.
func socketSends(t *testing.T, addr string, peer int) int {
	t.Helper()
	_, ps, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(ps)
	for _, s := range tcpSockets(t, false) {
		if s.state == "01" && s.local == port && s.remote == peer {
			return s.tx
		}
	}
	t.Fatalf("no socket of %s to port %d", addr, peer)
	return 0
}
