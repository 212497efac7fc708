package proxy

import (
	"errors"
	"syscall"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// node is one of a loop's own connections to a cluster node, watched in
// the loop's epoll set beside its clients: forwarded commands are written
// at the end of the pass that read them, and their replies are read and
// delivered in the pass that sees them come, with no goroutine between.
type node struct {
	p     *router.Pipe
	id    uint64 // in the loop's id space, shared with its clients
	fd    int    // -1 until dialled, and after the connection is lost
	mask  uint32
	dirty bool // in the loop's dirtyNodes
	// dialing: a goroutine connects (the loop must not wait for that);
	// commands gather in the pipe meanwhile.
	dialing bool
}

// dialed is a connection made for a node, or why there is none.
type dialed struct {
	n   *node
	fd  int
	err error
}

// pipeKey names a node's connection of one protocol, for replicas or not.
type pipeKey struct {
	addr            string
	resp3, readonly bool
	bucket          bool // for bucket steps
}

// Pipe is the loop's connection to the node at addr; what is sent on it is
// written at the end of this pass.
func (l *loop) Pipe(addr string, resp3, readonly bool) *router.Pipe {
	return l.pipe(pipeKey{addr: addr, resp3: resp3, readonly: readonly})
}

// BucketPipe is the loop's connection to the node at addr for bucket
// steps.
func (l *loop) BucketPipe(addr string) *router.Pipe {
	return l.pipe(pipeKey{addr: addr, bucket: true})
}

// HotCalls is the loop's coalescer of hot keys' calls.
func (l *loop) HotCalls() *router.HotCalls { return &l.hot }

// pipe is asked for every command sent: a loop talks to a handful of
// nodes, so the last few it named are looked for first, with compares of
// addresses that are mostly the same string (the slot map's), before the
// map, whose hashing of the address cost 4% of a pipelined GET.
func (l *loop) pipe(k pipeKey) *router.Pipe {
	for i := range l.recent {
		if r := &l.recent[i]; r.k == k {
			l.markNode(r.n)
			return r.n.p
		}
	}
	n := l.nodes[k]
	if n == nil {
		var p *router.Pipe
		if k.bucket {
			p = l.s.cfg.Decider.(pipeDecider).NewBucketPipe(k.addr)
		} else {
			p = l.s.cfg.Forwarder.NewPipe(k.addr, k.resp3, k.readonly)
		}
		n = &node{p: p, fd: -1}
		l.nodes[k] = n
	}
	l.recent[l.nextRecent%len(l.recent)] = recentNode{k, n}
	l.nextRecent++
	l.markNode(n)
	return n.p
}

// recentNode is one of the nodes a loop named last.
type recentNode struct {
	k pipeKey
	n *node
}

// markNode has n's pipe written at the end of this pass.
func (l *loop) markNode(n *node) {
	if !n.dirty {
		n.dirty = true
		l.dirtyNodes = append(l.dirtyNodes, n)
	}
}

// flushNodes writes what was sent on the nodes this pass, dialling those
// not connected.
func (l *loop) flushNodes() {
	if len(l.dirtyNodes) == 0 {
		return
	}
	now := time.Now()
	// By index: a node that fails here fails its calls, and a hot key's
	// call goes on to a sibling's node, which joins the list.
	for i := 0; i < len(l.dirtyNodes); i++ {
		n := l.dirtyNodes[i]
		n.dirty = false
		switch {
		case n.fd >= 0:
			l.writeNode(n, now)
			n.p.Sent(now)
		case len(n.p.Out()) > 0:
			// Stamped now, as if written: a call's deadline runs while its
			// connection is made, so a node that cannot be reached in time
			// fails the calls waiting for it as one that held them would
			// (overdue); the dial goes on, for the calls after.
			n.p.Sent(now)
			if !n.dialing {
				n.dialing = true
				go l.dial(n)
			}
		}
	}
	clear(l.dirtyNodes)
	l.dirtyNodes = l.dirtyNodes[:0]
}

// dial connects n on a goroutine of its own and hands the socket to the
// loop.
func (l *loop) dial(n *node) {
	d := dialed{n: n, fd: -1}
	conn, err := n.p.Dial()
	if err == nil {
		d.fd, err = takeSocket(conn)
	}
	d.err = err
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		if d.fd >= 0 {
			syscall.Close(d.fd)
		}
		return
	}
	l.dialed = append(l.dialed, d)
	l.poke()
}

// connected watches the sockets dialled since the last wake-up, and
// answers the commands of a node that could not be reached.
func (l *loop) connected(ds []dialed) {
	for _, d := range ds {
		n := d.n
		n.dialing = false
		if d.err == nil {
			l.lastID++
			n.id, n.fd, n.mask = l.lastID, d.fd, syscall.EPOLLIN
			if d.err = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, n.fd, idEvent(n.id, n.mask)); d.err != nil {
				syscall.Close(n.fd)
				n.fd = -1
			}
		}
		if d.err != nil {
			n.p.Fail(d.err)
			continue
		}
		l.nodeIDs[n.id] = n
		now := time.Now()
		l.writeNode(n, now)
		n.p.Sent(now) // what gathered during the dial
	}
}

// writeNode writes n's pipe as far as the socket takes it, and watches for
// room to write the rest.
func (l *loop) writeNode(n *node, now time.Time) {
	for out := n.p.Out(); len(out) > 0; out = n.p.Out() {
		k, err := rawWrite(n.fd, out)
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			break
		}
		if err != nil {
			l.lost(n, err)
			return
		}
		n.p.Wrote(k, now)
	}
	want := uint32(syscall.EPOLLIN)
	if len(n.p.Out()) > 0 {
		want |= syscall.EPOLLOUT
	}
	if want != n.mask {
		n.mask = want
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, n.fd, idEvent(n.id, want)); err != nil {
			l.lost(n, err)
		}
	}
}

// nodeEvent reads n's replies, which answers their commands, and writes
// what waited for room, as events say it may; it reports whether it read
// replies.
func (l *loop) nodeEvent(n *node, events uint32) (fed bool) {
	if events&(syscall.EPOLLIN|syscall.EPOLLERR|syscall.EPOLLHUP) != 0 {
		k, err := rawRead(n.fd, n.p.ReadBuf(readSize))
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
		case err != nil:
			l.lost(n, err)
			return false
		case k == 0:
			l.lost(n, errors.New("the node closed the connection"))
			return false
		default:
			n.p.Heard(l.now)
			if err := n.p.Feed(k); err != nil {
				l.lost(n, err)
				return false
			}
			fed = true
			if len(n.p.Out()) > 0 {
				l.markNode(n) // a bucket pipe had room for queued calls again
			}
		}
	}
	if events&syscall.EPOLLOUT != 0 && n.fd >= 0 {
		l.writeNode(n, l.now)
	}
	return fed
}

// lost closes n's connection and answers its commands an error; the next
// command sent on it dials again.
func (l *loop) lost(n *node, err error) {
	if n.fd < 0 {
		return
	}
	syscall.Close(n.fd)
	delete(l.nodeIDs, n.id)
	n.fd = -1
	n.p.Fail(err)
}

// overdue closes the connections of nodes that hold a command past their
// pipe's timeout (hung): its commands are answered an error, its bucket
// calls decided by the fallback. It reports whether it read from a node.
//
// A node past its deadline is read first: its reply may be in the socket,
// unread, when more sockets were ready than one epoll_wait returns (with
// thousands of busy clients, a node's turn comes passes later) or when it
// came during this pass. Such a node answered in time.
func (l *loop) overdue(now time.Time) (read bool) {
	for _, n := range l.nodes {
		if d, ok := n.p.Deadline(); !ok || !now.After(d) {
			continue
		}
		if n.fd < 0 {
			// Still connecting: its calls, none written, are failed; the
			// dial goes on.
			n.p.Fail(router.NotSent(router.ErrNoReply))
			continue
		}
		// Read until its socket is empty or it owes nothing past the
		// deadline, at most 64 reads a pass.
		for range 64 {
			if !l.nodeEvent(n, syscall.EPOLLIN) {
				break
			}
			read = true
			if d, ok := n.p.Deadline(); !ok || !now.After(d) {
				break
			}
		}
		if d, ok := n.p.Deadline(); ok && now.After(d) {
			l.lost(n, router.ErrNoReply)
		}
	}
	return read
}

// nextDeadline is the soonest a node is overdue, if one owes replies: the
// loop wakes up then to find it.
func (l *loop) nextDeadline() (time.Time, bool) {
	var first time.Time
	for _, n := range l.nodes {
		if d, ok := n.p.Deadline(); ok && (first.IsZero() || d.Before(first)) {
			first = d
		}
	}
	return first, !first.IsZero()
}

// dropGone closes and forgets, once a second, the loop's idle connections
// to the nodes that the slot map no longer names (removed from the
// cluster, or moved to a new address, left running): kept, they and their
// nodes would pile up as nodes are replaced. A node with commands in
// flight is left to finish, and looked at again at the next sweep; a
// later command for its address dials again.
func (l *loop) dropGone() {
	if len(l.nodes) == 0 || l.s.slots == nil || l.now.Sub(l.goneSwept) < time.Second {
		return
	}
	l.goneSwept = l.now
	m := l.s.slots.Map()
	for k, n := range l.nodes {
		if n.dialing || n.dirty || !n.p.Idle() || !m.Gone(k.addr) {
			continue
		}
		if n.fd >= 0 {
			syscall.Close(n.fd)
			delete(l.nodeIDs, n.id)
		}
		delete(l.nodes, k)
		for i := range l.recent {
			if l.recent[i].n == n {
				l.recent[i] = recentNode{}
			}
		}
	}
}

// closeNodes closes the loop's connections to the nodes.
func (l *loop) closeNodes() {
	for _, n := range l.nodeIDs {
		syscall.Close(n.fd)
	}
}

func idEvent(id uint64, events uint32) *syscall.EpollEvent {
	return &syscall.EpollEvent{Events: events, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
}
