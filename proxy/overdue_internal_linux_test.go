package proxy

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A node whose reply sits unread in its socket when its deadline passes
// answered in time: the loop had not read it yet (more sockets were ready
// than one epoll_wait returns, or the reply came during a long pass). It
// is read, not taken for hung: its command gets the reply, not an error,
// and the connection stays.
func TestOverdueNodeWithItsReplyInTheSocketIsNotLost(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := connectedCluster(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := New(Config{Decider: r, Forwarder: r})
	l, err := s.newLoop()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.shutdown)
	const sl = 0
	owner, err := c.Primary(ctx, sl)
	if err != nil {
		t.Fatal(err)
	}
	// The node's socket is one end of a pair: the test answers for it.
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(pair[1]) })
	n := &node{p: r.NewPipe(owner.Addr, false, false), fd: pair[0], id: 1000, mask: syscall.EPOLLIN}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, n.fd, idEvent(n.id, n.mask)); err != nil {
		t.Fatal(err)
	}
	l.nodes[pipeKey{addr: owner.Addr}] = n
	l.nodeIDs[n.id] = n
	ping := []byte("*1\r\n$4\r\nPING\r\n")
	replies := make([][]byte, 1)
	r.Forward(ctx, l, []router.Forward{{Slot: sl, Cmd: ping}}, replies, func([]int) {})
	l.flushNodes()
	got := make([]byte, 64)
	if k, err := syscall.Read(pair[1], got); err != nil || string(got[:k]) != string(ping) {
		t.Fatalf("the node's socket got %q (%v), want %q", got[:max(k, 0)], err, ping)
	}
	if _, err := syscall.Write(pair[1], []byte("+PONG\r\n")); err != nil {
		t.Fatal(err)
	}
	d, ok := n.p.Deadline()
	if !ok {
		t.Fatal("the PING written has no deadline")
	}
	l.overdue(d.Add(time.Millisecond))
	if string(replies[0]) != "+PONG\r\n" || n.fd != pair[0] {
		t.Fatalf("the PING answered %q, the node's fd %d (was %d): want +PONG on the same connection", replies[0], n.fd, pair[0])
	}
}
