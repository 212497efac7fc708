package proxy

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// A node whose reply sits unread in its socket when its deadline passes
// answered in time: the loop had not read it yet (more sockets were ready
// than one epoll_wait returns, or the reply came during a long pass). It
// is read, whole (more than one read takes), not taken for hung: its
// command gets the reply, not an error, and the connection stays.
func TestOverdueNodeWithItsReplyInTheSocketIsNotLost(t *testing.T) {
	c, r, l := clusterLoop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const sl = 0
	owner, err := c.Primary(ctx, sl)
	if err != nil {
		t.Fatal(err)
	}
	n, peer := pairedNode(t, l, r, owner.Addr, 1000) // the test answers for the node
	fd := n.fd
	// The pass began before the write: bytes read in it extend no
	// deadline (a bucket pipe's never do), the whole reply must be read.
	l.now = time.Now()
	get := router.AppendCommand(nil, [][]byte{[]byte("GET"), []byte("k")})
	replies := make([][]byte, 1)
	r.Forward(ctx, l, []router.Forward{{Slot: sl, Cmd: get}}, replies, func([]int) {})
	l.flushNodes()
	got := make([]byte, 64)
	if k, err := syscall.Read(peer, got); err != nil || string(got[:k]) != string(get) {
		t.Fatalf("the node's socket got %q (%v), want %q", got[:max(k, 0)], err, get)
	}
	value := strings.Repeat("v", 3*readSize)
	reply := "$" + strconv.Itoa(len(value)) + "\r\n" + value + "\r\n"
	if _, err := syscall.Write(peer, []byte(reply)); err != nil {
		t.Fatal(err)
	}
	d, ok := n.p.Deadline()
	if !ok {
		t.Fatal("the GET written has no deadline")
	}
	l.overdue(d.Add(time.Millisecond))
	if string(replies[0]) != reply || n.fd != fd {
		t.Fatalf("the GET answered %.60q (%d bytes), the node's fd %d (was %d): want the %d-byte reply on the same connection",
			replies[0], len(replies[0]), n.fd, fd, len(reply))
	}
}
