package proxy

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A node's socket dialled after the loop's last wake-up is closed when the
// loop ends (a drained loop ends without another wake-up).
func TestLoopShutdownClosesSocketsDialledMeanwhile(t *testing.T) {
	s := New(Config{Decider: router.NewMemory(0)})
	l, err := s.newLoop()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.dialed = append(l.dialed, dialed{n: &node{fd: -1}, fd: fd})
	l.mu.Unlock()
	l.shutdown()
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		syscall.Close(fd)
		t.Fatalf("the dialled socket is still open after the loop's shutdown (fcntl: %v)", err)
	}
}

// A node whose write fails during the loop's flush fails its commands, and
// what their callbacks send meanwhile on another node (a hot key's call
// goes on to a sibling's node) is written in that same flush: a node left
// marked but off the flush's list would never be written again, and every
// command the loop sent it after would wait for good.
func TestFlushWritesNodesSentOnWhileFlushing(t *testing.T) {
	c, r, l := clusterLoop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Two slots of two primaries.
	slotA, slotB := 0, 16383
	a, err := c.Primary(ctx, slotA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Primary(ctx, slotB)
	if err != nil || a == b {
		t.Fatalf("slots %d and %d: %v, %v", slotA, slotB, a, b)
	}
	// A's socket is not connected: the flush's write to it fails. B's is
	// one end of a pair the test reads.
	fdA, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	addNode(t, l, r, a.Addr, fdA, 1000)
	nb, peer := pairedNode(t, l, r, b.Addr, 1001)
	ping := []byte("*1\r\n$4\r\nPING\r\n")
	repliesA, repliesB := make([][]byte, 1), make([][]byte, 1)
	r.Forward(ctx, l, []router.Forward{{Slot: slotA, Cmd: ping}}, repliesA, func([]int) {
		r.Forward(ctx, l, []router.Forward{{Slot: slotB, Cmd: ping}}, repliesB, func([]int) {})
	})
	l.flushNodes()
	if !strings.HasPrefix(string(repliesA[0]), "-ERR") {
		t.Fatalf("the command on the unconnected socket answered %q, want an error", repliesA[0])
	}
	if nb.dirty || len(nb.p.Out()) > 0 {
		t.Fatalf("the command sent on %s during the flush was left unwritten (%d bytes, marked %v)", b.Addr, len(nb.p.Out()), nb.dirty)
	}
	got := make([]byte, 64)
	k, err := syscall.Read(peer, got)
	if err != nil || string(got[:k]) != string(ping) {
		t.Fatalf("%s's socket got %q (%v), want %q", b.Addr, got[:max(k, 0)], err, ping)
	}
}

// clusterLoop is a loop, not running, of a server on a router on a new
// cluster of three primaries: a test drives its steps itself.
func clusterLoop(t *testing.T) (*clustertest.Cluster, *router.Cluster, *loop) {
	t.Helper()
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := connectedCluster(t, c)
	s := New(Config{Decider: r, Forwarder: r})
	l, err := s.newLoop()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.shutdown)
	return c, r, l
}

// addNode gives l a connection to the node at addr, for ordinary
// commands, on the socket fd the test made.
func addNode(t *testing.T, l *loop, r *router.Cluster, addr string, fd int, id uint64) *node {
	t.Helper()
	n := &node{p: r.NewPipe(addr, false, false), fd: fd, id: id, mask: syscall.EPOLLIN}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, n.fd, idEvent(n.id, n.mask)); err != nil {
		t.Fatal(err)
	}
	l.nodes[pipeKey{addr: addr}] = n
	l.nodeIDs[n.id] = n
	return n
}

// pairedNode is addNode on one end of a socket pair, whose other end,
// peer, the test reads and writes for the node.
func pairedNode(t *testing.T, l *loop, r *router.Cluster, addr string, id uint64) (n *node, peer int) {
	t.Helper()
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(pair[1]) })
	return addNode(t, l, r, addr, pair[0], id), pair[1]
}

// connectedCluster is a router on c, without hot-key detection, that has
// read the slot map.
func connectedCluster(t *testing.T, c *clustertest.Cluster) *router.Cluster {
	t.Helper()
	r := router.NewCluster(router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1})
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}
