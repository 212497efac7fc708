package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/sluice-rl/sluice/router"
)

// An event loop serves many clients from one goroutine, as Redis does: it
// waits on epoll for the sockets that have bytes, reads each once, answers
// what it can at once and submits the bucket requests of every client it
// read to the Decider as one round. It never waits for the shards: a
// round's decisions come back on the loop's eventfd, whenever they are
// ready, and each client's replies leave in its commands' order. Compared
// with a goroutine per client, a request costs no read that finds the
// socket empty, no park and wake of a goroutine, and no round trip of its
// own to the shards: a round carries the requests of all the clients that
// were ready.

// defaultLoops is a loop per two cores the Go runtime uses, at least one.
// A loop's shard calls coalesce only with its own clients' (its pipes are
// its own), so fewer, busier loops send bigger script calls, which cost
// the shards less per decision; and the other cores run what a loop hands
// off (GC, the probes, hot keys' calls). On 2 cores shared with 6
// redis-servers and redis-benchmark, 1 loop against 2: THROTTLE 54k/s
// against 44k/s, one hot key 90k/s against 68k/s, GET 97k/s against 84k/s.
func defaultLoops() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// keepBuffer is the most a loop keeps of its input buffer from one read to
// the next.
const keepBuffer = 1 << 20

// A client is not read while it has maxInFlight commands unanswered (a
// command split per slot counting as its parts: client.split) or
// maxUnsent bytes of replies its socket has not taken: its commands wait in
// the socket, and its memory here stays bounded (backpressure).
const (
	maxInFlight = 1024
	maxUnsent   = 256 << 10
)

// A client's replies are delayed for at most maxDelays passes, and up to
// delayBytes, while replies to commands it sent with them are still to
// come: a pipeline spread over three shards is answered in one write
// rather than one per shard, which saves a write here and a read and a
// wake-up of the client (redis-benchmark -P 16 reads a partial answer and
// sleeps again). The loop writes every delayed reply before it sleeps, so
// a delay never waits for an event: it only lasts while the loop is busy.
const (
	maxDelays  = 3
	delayBytes = 16 << 10
)

// readSize is the most a round reads from one socket; the rest waits for
// the next round, so one client cannot fill a round alone.
const readSize = 16 << 10

// longRead is the most a round reads from a socket into a command longer
// than readSize (readLong): a copy of about 50 µs, no longer than a pass
// of small commands takes.
const longRead = 256 << 10

// passParts is about the most parts of commands (a command split per slot
// counting as its parts, as for maxInFlight) a pass takes of one client:
// the rest of what it read waits in its pend for the next pass (backlog).
// A read of MGETs of hundreds of keys over as many slots is a thousand
// parts or more to split, send and merge; taken in one pass, it held the
// other clients of the loop for all that time (GET's p99 13-20 ms against
// 7-11 ms on goroutines). A long pipeline of ordinary commands is cut
// too, at 256 of them (a command counts once it is queued behind one in
// flight), which costs it a pass, not a read.
const passParts = 256

// loopable reports whether event loops can serve ln's connections: those
// whose socket can be taken from Go's poller.
func loopable(ln net.Listener) bool {
	switch ln.(type) {
	case *net.TCPListener, *net.UnixListener:
		return true
	}
	return false
}

// startLoops starts the event loops; it is called with s.mu held.
func (s *Server) startLoops() error {
	for range s.cfg.Loops {
		l, err := s.newLoop()
		if err != nil {
			// None runs yet: stop would wait for a run that never began.
			for _, l := range s.loops {
				l.shutdown()
			}
			s.loops = nil
			return err
		}
		s.loops = append(s.loops, l)
	}
	// See run: a loop may wait without telling the scheduler only while
	// the other goroutines have a P of their own, counting every Server's
	// loops in the process (a program or a test may run several).
	n := int64(len(s.loops))
	raw := rawLoops.Add(n) < int64(runtime.GOMAXPROCS(0))
	if raw {
		s.polling = s.cfg.BusyPoll
	} else {
		rawLoops.Add(-n)
	}
	for _, l := range s.loops {
		l.rawWait = raw
		go l.run()
	}
	return nil
}

// rawLoops counts the loops in the process that may wait in a raw
// syscall (rawWait), each holding a P meanwhile: two Servers' loops that
// each took their own count for the whole machine's held every P, and the
// rest of the process waited for preemption (a round trip of 20 ms).
var rawLoops atomic.Int64

// acceptLoops hands the loops the clients ln accepts, in turn.
func (s *Server) acceptLoops(ln net.Listener) error {
	s.mu.Lock()
	loops := s.loops
	s.mu.Unlock()

	backoff := time.Duration(0)
	for i := 0; ; i++ {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				for _, l := range loops {
					if s.isDraining() {
						<-l.done // Shutdown drains it, or Close stops it
					} else {
						l.stop()
					}
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.loopErr
			}
			backoff = s.acceptFailed(backoff, err)
			continue
		}
		backoff = 0
		if !s.admit() {
			s.reject(nc, 100*time.Millisecond)
			continue
		}
		addr, local := nc.RemoteAddr().String(), nc.LocalAddr()
		fd, err := takeSocket(nc)
		if err != nil {
			s.unadmit()
			s.log.Warn("taking a client's socket", zap.String("addr", addr), zap.Error(err))
			continue
		}
		c := &fdConn{client: s.newClient(addr, local, fd), fd: fd, f: s.newFramer()}
		c.client.fd = c
		// Its loop sees the connection end, as at the client's own close,
		// and closes it; the descriptor stays its until then (discard).
		c.view.setKill(func() { syscall.Shutdown(fd, syscall.SHUT_RDWR) })
		loops[i%len(loops)].add(c)
	}
}

// loopFailed ends serving when a loop cannot go on: its clients are gone,
// and Serve returns err.
func (s *Server) loopFailed(err error) {
	s.mu.Lock()
	if s.loopErr == nil {
		s.loopErr = fmt.Errorf("proxy: event loop: %w", err)
	}
	lns := s.lns
	s.mu.Unlock()
	closeAll(lns)
}

// takeSocket takes nc's socket away from Go's poller: a duplicate of its
// descriptor, which shares the socket and its O_NONBLOCK, outlives nc.
func takeSocket(nc net.Conn) (int, error) {
	defer nc.Close()
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) {
		r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if errno != 0 {
			derr = errno
			return
		}
		fd = int(r)
	}); err != nil {
		return -1, err
	}
	return fd, derr
}

// fdConn is a client served by a loop.
type fdConn struct {
	client
	fd   int
	id   uint64 // the loop's name for it in epoll events; fds are reused
	loop *loop  // the loop that serves it
	f    framer
	// busyWin is the last window of its loop's busyClients it sent in.
	busyWin uint64

	pend   []byte // the start of a command not yet whole, already framed
	sent   int    // bytes of out the socket has taken
	mask   uint32 // what epoll watches it for
	dirty  bool   // in the loop's dirty list
	delays uint8  // passes its replies were delayed (maxDelays)
	eof    bool   // the client sent all it will
	fenced bool   // its tunnel was fenced after its EOF (send)
	// backlog: a pass stopped taking its commands at passParts; the rest
	// is in pend, unframed, for the next pass, and it is not read meanwhile.
	backlog bool
	// hungUp: it ended its side while its blocking command kept it
	// unread. What it sent is still read (after the command, if that is
	// answered) up to its EOF, as Redis reads it.
	hungUp bool
	// drained: closing because its loop drains. What sluice read of it
	// is still taken and answered, as at its EOF; nothing more is read.
	drained bool
	active  time.Time // when it last sent or was sent something: for IdleTimeout
	// lingerEnd is when a client whose replies are all written, and whose
	// input is discarded since (see lingerTime), is closed at the latest.
	lingerEnd time.Time
}

type loop struct {
	s    *Server
	epfd int
	wake int // an eventfd: clients were added, decisions came back, or stop

	mu       sync.Mutex // guards added, stopping, draining, decided and idle
	added    []*fdConn
	stopping bool
	// draining: its clients are answered what they sent and closed; the
	// loop ends once none is left.
	draining bool
	decided  []decision // results in, not yet taken by the loop
	dialed   []dialed   // node connections made, not yet watched
	// idle: the loop waits in epoll_wait with nothing decided to take.
	// Results that come back while it is busy are taken without a wake-up,
	// which under load saves an eventfd write, its read and an epoll pass
	// per shard answer.
	idle bool
	done chan struct{}

	// Owned by the loop's goroutine.
	conns  map[uint64]*fdConn
	lastID uint64
	events [128]syscall.EpollEvent
	in     []byte     // what the current read brought
	argv   [][]byte   // the current command's arguments, into in
	cur    *round     // the bucket requests read since the last submit
	resets *round     // the THROTTLE.RESETs read since then (takeReset)
	free   []*round   // rounds to reuse
	back   []decision // taken from decided, to deliver
	dirty  []*fdConn
	later  []*fdConn // replies delayed this pass: dirty again next pass
	// backlog are the clients whose commands read are taken next pass
	// (passParts); the pass after that one takes them without an event.
	backlog []*fdConn
	// flushAll: the pass writes every reply, delayed or not: the loop
	// would sleep otherwise.
	flushAll bool
	markFn   func(*client)
	// lingering are the clients closing after QUIT or a protocol error, in
	// the order they began to linger, so by their lingerEnd.
	lingering []*fdConn
	// The loop's own connections to the cluster's nodes.
	nodes      map[pipeKey]*node
	rawWait    bool          // fewer loops than Ps: run may wait in a raw syscall
	recent     [8]recentNode // the nodes named last, looked for first
	nextRecent int
	hot        router.HotCalls  // hot keys' calls on the pipes
	nodeIDs    map[uint64]*node // the connected ones, by epoll id
	dirtyNodes []*node          // sent on this pass
	now        time.Time        // when this pass began
	busy       busyClients      // whether to poll before sleeping
	idleSwept  time.Time        // when closeIdle last looked
	goneSwept  time.Time        // when dropGone last looked
}

// A loop keeps up to keepRounds idle rounds of at most keepRoundSize
// requests for reuse: enough for the rounds in flight at a steady load (50
// clients pipelining 16 commands make rounds of 800), without holding a
// burst's worth of memory afterwards (about 2 MB at most).
const (
	keepRounds    = 8
	keepRoundSize = 1024
)

func (s *Server) newLoop() (*loop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	r, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errno != 0 {
		syscall.Close(epfd)
		return nil, errno
	}
	l := &loop{s: s, epfd: epfd, wake: int(r), done: make(chan struct{}), conns: make(map[uint64]*fdConn),
		nodes: make(map[pipeKey]*node), nodeIDs: make(map[uint64]*node)}
	l.markFn = l.mark
	// The wake-up's event carries id 0; clients' ids start at 1.
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, l.wake, &syscall.EpollEvent{Events: syscall.EPOLLIN}); err != nil {
		syscall.Close(l.wake)
		syscall.Close(epfd)
		return nil, err
	}
	return l, nil
}

// add hands c to the loop.
func (l *loop) add(c *fdConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		l.discard(c)
		return
	}
	l.added = append(l.added, c)
	l.poke()
}

// stop makes the loop close its clients and end, and waits for it.
func (l *loop) stop() {
	l.mu.Lock()
	if !l.stopping {
		l.stopping = true
		l.poke()
	}
	l.mu.Unlock()
	<-l.done
}

// drain makes the loop answer what its clients sent, close each once its
// replies are written, and end when none is left; l.done is closed then.
// It does not wait: the loops drain together.
func (l *loop) drain() {
	l.mu.Lock()
	if !l.stopping && !l.draining {
		l.draining = true
		l.poke()
	}
	l.mu.Unlock()
}

// drained waits for the loop to end, drained or stopped.
func (l *loop) drained() { <-l.done }

// poke wakes the loop up; l.mu is held, so that the eventfd is open.
func (l *loop) poke() {
	one := [8]byte{1}
	syscall.Write(l.wake, one[:]) // EAGAIN: a wake-up is pending anyway
}

func (l *loop) run() {
	defer l.shutdown()
	if l.rawWait {
		defer rawLoops.Add(-1)
	}
	for {
		ms := l.sleep()
		n, err := pollNow(l.epfd, l.events[:])
		switch {
		case n != 0 || ms == 0:
		case err == nil && len(l.dirty) > 0:
			// Nothing came, but replies were delayed (maxDelays): this
			// pass writes them, and the next one sleeps.
			l.flushAll = true
		case l.rawWait && l.s.cfg.BusyPoll > 0 && l.busy.few():
			n, err = l.spinWait(ms)
		case l.rawWait:
			// Waiting in epoll_wait without entersyscall keeps the loop's
			// P: no hand-off by sysmon, no spinning M woken to look for
			// work at every wait. A signal still ends the wait (EINTR),
			// so GC and preemption reach the loop at its next call; idle,
			// sysmon's preemption wakes it about every 10 ms. A/B at the
			// same time (redis-benchmark, 3 to 5 alternations): CPU per
			// THROTTLE 6.6-6.8 -> 6.1-6.4 us with 50 clients, 33-36 ->
			// 29-32 us with one.
			n, err = pollWait(l.epfd, l.events[:], ms)
		default:
			n, err = syscall.EpollWait(l.epfd, l.events[:], ms)
		}
		l.now = time.Now()
		l.busy.tick(l.now)
		fed := false
		l.mu.Lock()
		l.idle = false
		l.mu.Unlock()
		if err == syscall.EINTR {
			// No event, but the pass goes on: a signal comes about every
			// 10 ms to a loop waiting in a raw syscall (preemption), so a
			// pass that began again here would never reach closeIdle,
			// whose sweep waits a second.
			n, err = 0, nil
		}
		if err != nil {
			l.s.loopFailed(err)
			return
		}
		l.takeBacklog()
		for _, ev := range l.events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				if !l.wakeUp() {
					return
				}
				continue
			}
			if c := l.conns[id]; c != nil {
				l.event(c, ev.Events)
			} else if n := l.nodeIDs[id]; n != nil {
				l.nodeEvent(n, ev.Events)
				fed = true
			}
		}
		l.submit()
		if fed {
			// Replies read from the nodes were answered on this goroutine.
			l.mu.Lock()
			l.takeDecided()
			l.mu.Unlock()
		}
		// Before the flush: a hung node's hot calls go on to a sibling's
		// node, to be written in this pass.
		if len(l.nodes) > 0 && l.overdue(time.Now()) {
			l.mu.Lock()
			l.takeDecided()
			l.mu.Unlock()
		}
		l.flushNodes()
		l.endRound()
		l.closeLingering()
		l.closeIdle()
		l.dropGone()
		if len(l.conns) == 0 && l.isDraining() {
			return
		}
	}
}

// spinWait waits for events as run does, but polls for up to BusyPoll
// first, yielding the CPU between polls to whatever else may run on it.
//
// Why: on a virtual machine a CPU with nothing to run halts, and waking it
// again (an interrupt through the hypervisor) takes tens of µs. A loop
// serving one or two busy clients sleeps at every command, and so pays
// that twice on each (the client's command, the shard's answer) where a
// client talking to Redis directly pays it once. Polling keeps the loop's
// CPU awake through those gaps. Measured with one redis-benchmark client
// on the 2-core test VM: THROTTLE p50 151 -> 95 µs, GET 95 -> 55 µs (the
// same as GET straight to the node). With more busy clients, events pile
// up while the loop works and it seldom sleeps; polling there only took
// CPU from the servers (the hot-key row 1.22x -> 0.87x direct), so
// busyClients turns it off.
//
// The wait after the spin is still ms, so a deadline (a node's timeout, a
// lingering client) may be seen up to BusyPoll (at most 1 ms) later than
// without polling, as epoll_wait's whole milliseconds already round it up.
func (l *loop) spinWait(ms int) (int, error) {
	end := time.Now().Add(l.s.cfg.BusyPoll)
	for {
		yield()
		if n, err := pollNow(l.epfd, l.events[:]); n != 0 || err != nil {
			return n, err
		}
		if !time.Now().Before(end) {
			return pollWait(l.epfd, l.events[:], ms)
		}
	}
}

// busyFew is the most clients sending commands on a loop at which it polls
// before it sleeps (spinWait).
const busyFew = 2

// busyClients counts the clients of a loop that sent commands in the
// current window of a millisecond and in the one before.
type busyClients struct {
	start     time.Time // of the current window
	win       uint64    // the current window's number
	cur, prev int
}

// tick starts a new window when the current one is a millisecond old.
func (b *busyClients) tick(now time.Time) {
	age := now.Sub(b.start)
	if age < time.Millisecond {
		return
	}
	b.prev, b.cur = b.cur, 0
	if age >= 2*time.Millisecond {
		b.prev = 0 // the window before now had no pass, so no command
	}
	b.win++
	b.start = now
}

// saw counts c, which sent commands in the current window.
func (b *busyClients) saw(c *fdConn) {
	if c.busyWin != b.win {
		c.busyWin = b.win
		b.cur++
	}
}

// few reports whether at least one client and at most busyFew sent in
// either window. A loop none of whose clients is busy does not poll: it is
// woken about every 10 ms even when idle (preemption, see run), and a spin
// at each of those wake-ups would cost an idle sluice CPU for nothing.
func (b *busyClients) few() bool {
	n := max(b.cur, b.prev)
	return n > 0 && n <= busyFew
}

func (l *loop) isDraining() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.draining
}

// closeIdle closes the clients idle past the server's IdleTimeout, and
// those whose replies stayed over the soft output limit too long while
// they read nothing (no event would look at them), looking at most once a
// second, as Redis's clients cron does.
func (l *loop) closeIdle() {
	timeout, soft := l.s.cfg.IdleTimeout, l.s.cfg.OutputLimit.Soft > 0
	if (timeout <= 0 && !soft) || l.now.Sub(l.idleSwept) < time.Second {
		return
	}
	l.idleSwept = l.now
	for _, c := range l.conns {
		switch {
		case !c.lingerEnd.IsZero():
		// One that unsubscribed from everything keeps its tunnel, but is
		// no subscriber: Redis times it out.
		case timeout > 0 && l.now.Sub(c.active) > timeout && c.inFlight() == 0 && (c.tunnel == nil || !c.subs):
			l.close(c)
		case soft && len(c.out.b) > c.sent:
			l.flush(c) // closes it if it is over the limit
		}
	}
}

// event handles what epoll reported of c.
func (l *loop) event(c *fdConn, events uint32) {
	if !c.lingerEnd.IsZero() {
		l.discardInput(c)
		return
	}
	switch {
	case c.mask&syscall.EPOLLIN != 0 && events&(readable|syscall.EPOLLERR|syscall.EPOLLHUP) != 0:
		l.read(c) // finds an error or EOF itself
		if events&syscall.EPOLLRDHUP != 0 {
			// It sent all it will: a blocking command it sent does not
			// wait (router.Blocked), as Redis answers what a client sent
			// before its end. Its EOF, read next, would come once the
			// command raced to its node.
			c.cancelBlocked()
		}
	case events&(syscall.EPOLLERR|syscall.EPOLLHUP) != 0 && events&syscall.EPOLLOUT == 0:
		l.close(c) // not reading, and nothing can be written
	case events&syscall.EPOLLRDHUP != 0:
		// Blocked, so not read: it sent all it will, so its blocking
		// command does not wait. What it sent after the command may still
		// be in the socket, unread: it is read once the command is
		// answered, up to the EOF, and discarded if it is not (closing
		// with input unread would reset the connection, dropping replies
		// on their way).
		c.closing, c.hungUp = true, true
		c.cancelBlocked()
		l.mark(&c.client)
	}
	if events&syscall.EPOLLOUT != 0 {
		l.mark(&c.client)
	}
}

// endRound delivers the decisions that came back, writes every client
// with something new to write, and lets go of big buffers.
func (l *loop) endRound() {
	for _, d := range l.back {
		l.deliver(d)
	}
	clear(l.back)
	l.back = l.back[:0]
	// By index: a client that resumes taking commands is marked again.
	for i := 0; i < len(l.dirty); i++ {
		c := l.dirty[i]
		c.dirty = false
		if c.gone {
			continue
		}
		answered := len(c.out.b) // before the blocking command's reply
		l.s.drain(&c.client)
		if c.blockTurn() {
			l.round().sendBlocking(&c.client)
		} else if b := c.block; c.unblocked() {
			if b.f.Blocked.Ended() {
				// Unanswered, as Redis frees it: nothing it sent after
				// the command runs. It lingers once the replies before
				// the command are written, its input discarded, so that
				// the close resets nothing.
				c.out.b = c.out.b[:answered]
				c.closing, c.eof, c.hungUp = true, false, false
				c.pend = nil
			} else if (!c.closing || c.eof || c.drained || c.hungUp) && !l.pastLimit(c) {
				l.resume(c)
			}
		} else if c.firstDrained() && (!c.closing || c.eof || c.drained) && !l.pastLimit(c) {
			// Past the limit it is closed before what it sent after is
			// taken, as Redis runs nothing more of a client it closes (a
			// SUBSCRIBE taken would also exempt it from the limit). At
			// its EOF what it sent before its end is answered, as after a
			// blocking command.
			l.resume(c)
		}
		if c.gone {
			continue
		}
		l.send(c, !l.flushAll)
	}
	clear(l.dirty)
	l.dirty = l.dirty[:0]
	for _, c := range l.later {
		if !c.gone && !c.dirty {
			c.dirty = true
			l.dirty = append(l.dirty, c)
		}
	}
	clear(l.later)
	l.later = l.later[:0]
	l.flushAll = false
	if cap(l.in) > keepBuffer {
		l.in = nil
	}
	if cap(l.argv) > 1024 {
		l.argv = nil
	}
}

// wakeUp registers the clients handed over and takes the rounds decided
// since the last wake-up. It reports false when the loop must stop.
func (l *loop) wakeUp() bool {
	var buf [8]byte
	syscall.Read(l.wake, buf[:])
	l.mu.Lock()
	added, stopping, ds, draining := l.added, l.stopping, l.dialed, l.draining
	l.added, l.dialed = nil, nil
	l.takeDecided()
	l.mu.Unlock()
	l.connected(ds)
	for _, c := range added {
		l.lastID++
		c.id = l.lastID
		c.mask = readable
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, c.fd, c.event(readable)); err != nil {
			l.s.log.Warn("watching a client's socket", zap.String("addr", c.addr), zap.Error(err))
			l.discard(c)
			continue
		}
		c.loop = l
		c.active = time.Now()
		l.conns[c.id] = c
	}
	if draining {
		// Read no more: each client is closed once its replies are out.
		// Those just added too, accepted as the listener closed: no
		// wake-up may come after this one to close them.
		for _, c := range l.conns {
			if c.closing {
				continue
			}
			if c.owesNothing() && inputWaiting(c.fd) == 0 {
				// Closed at once: with nothing to answer and nothing sent
				// to it unread, its close loses nothing, and pooled idle
				// connections must not hold Shutdown for lingerTime.
				l.close(c)
				continue
			}
			c.closing, c.drained = true, true
			c.cancelBlocked() // as Redis ends blocked clients at shutdown
			l.mark(&c.client)
		}
	}
	return !stopping
}

// round is the round the requests being read join.
func (l *loop) round() *round { return l.pending(&l.cur) }

// pending is *p, the round of l.cur or l.resets, made when there is none.
func (l *loop) pending(p **round) *round {
	r := *p
	if r == nil {
		if n := len(l.free); n > 0 {
			r = l.free[n-1]
			l.free = l.free[:n-1]
		} else {
			r = &round{}
			r.done = func(idx []int) { l.decided1(r, idx) }
		}
		*p = r
	}
	if len(r.reqs)+len(r.fwd) == 0 {
		// A round of local commands only is never submitted, so it stays
		// l.cur: its start must move with what is read, or CLIENT LIST's
		// idle and the latency of its first request count from when it
		// was first taken.
		r.start = l.now
	}
	return r
}

// decision is results of a round that came back together.
type decision struct {
	r   *round
	idx []int
	// Or what a subscriber's tunnel sent it, or that the tunnel ended.
	sub        *fdConn
	gen        int // of sub's tunnel
	data       []byte
	subscribed bool // after data
	answered   bool // the oldest command sent through the tunnel, with data
	ended      bool
}

// submit sends the requests read since the last submit to the Decider.
// What it decides at once (the embedded backend, fallback) is delivered in
// this round, without a wake-up.
func (l *loop) submit() {
	cur := l.submit1(&l.cur)
	if resets := l.submit1(&l.resets); cur || resets {
		l.mu.Lock()
		l.takeDecided()
		l.mu.Unlock()
	}
}

// submit1 submits *p, l.cur or l.resets, if it holds requests, and
// reports whether it did.
func (l *loop) submit1(p **round) bool {
	r := *p
	if r == nil || len(r.reqs)+len(r.fwd) == 0 {
		return false
	}
	*p = nil
	r.submit(l.s.ctx, l.s.cfg.Decider, l.s.cfg.Forwarder, l)
	return true
}

// sleep is how long the next epoll_wait may block, in ms: not at all when
// results came back meanwhile (they are taken now) or commands wait to be
// submitted, else until an event or the first lingering client's end, the
// loop then being idle.
func (l *loop) sleep() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.decided) > 0 {
		l.takeDecided()
		return 0
	}
	for _, r := range [...]*round{l.cur, l.resets} {
		if r != nil && len(r.reqs)+len(r.fwd) > 0 {
			return 0 // a blocking command's turn came, or its client resumed
		}
	}
	if len(l.dirtyNodes) > 0 {
		return 0 // sent on a node since the flush: no event would write it
	}
	if len(l.backlog) > 0 {
		return 0 // commands read wait to be taken: no event would take them
	}
	l.idle = true
	ms := -1
	if len(l.lingering) > 0 {
		ms = int(max(time.Until(l.lingering[0].lingerEnd)+time.Millisecond-1, 0) / time.Millisecond)
	}
	if (l.s.cfg.IdleTimeout > 0 || l.s.cfg.OutputLimit.Soft > 0) && len(l.conns) > 0 && (ms < 0 || ms > 1000) {
		ms = 1000 // to close idle clients and those over the soft output limit
	}
	if d, ok := l.nextDeadline(); ok {
		// Wake up when a node is overdue, rounded up to the next ms.
		wait := int((time.Until(d) + time.Millisecond - 1) / time.Millisecond)
		if ms < 0 || wait < ms {
			ms = max(wait, 0)
		}
	}
	return ms
}

// takeDecided moves the results that came back to l.back; l.mu is held.
func (l *loop) takeDecided() {
	l.back = append(l.back, l.decided...)
	clear(l.decided)
	l.decided = l.decided[:0]
}

// decided1 is a round's done: from any goroutine.
func (l *loop) decided1(r *round, idx []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		return // its clients are closed
	}
	l.decided = append(l.decided, decision{r: r, idx: idx})
	if l.idle {
		l.idle = false
		l.poke()
	}
}

// tunnelCallbacks are what c's tunnel calls with each reply or message,
// and when it ends: c is then closed once its replies are written (the
// tunnel answered its commands an error), as a client of a Redis node
// that went away would be.
func (c *fdConn) tunnelCallbacks(gen int) (onData func([]byte, bool, bool), onEnd func(error)) {
	l := c.loop
	return func(data []byte, subscribed, answered bool) {
			l.fromTunnel(decision{sub: c, gen: gen, data: data, subscribed: subscribed, answered: answered})
		},
		func(error) { l.fromTunnel(decision{sub: c, gen: gen, ended: true}) }
}

func (l *loop) fromTunnel(d decision) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		return
	}
	l.decided = append(l.decided, d)
	if l.idle {
		l.idle = false
		l.poke()
	}
}

// deliver hands results to their clients, and keeps their round for reuse
// once it has delivered them all.
func (l *loop) deliver(d decision) {
	if c := d.sub; c != nil {
		switch {
		case c.gone || d.gen != c.tunnelGen:
			// Gone, or a tunnel it reset: nothing to deliver.
		case d.ended:
			c.closing = true
			c.cancelBlocked()
			l.mark(&c.client)
		case !c.pushData(d.data, d.subscribed, c.sent):
			l.s.log.Warn("closing a subscriber that does not read its messages", zap.String("addr", c.addr))
			l.close(c)
		default:
			if d.answered {
				c.tunnelAnswered()
			}
			l.mark(&c.client)
		}
		return
	}
	r := d.r
	if n := r.decisions(d.idx); n > 0 {
		now := l.now
		if !now.After(r.start) {
			// Decided in the pass that read it (the embedded backend, a
			// denial from the last one), whose clock has not moved: a
			// latency of 0 would say nothing.
			now = time.Now()
		}
		l.s.metrics.observe(r.start, now, n)
	}
	l.s.countLost(nil, r, d.idx)
	if !r.deliver(d.idx, l.markFn) {
		return
	}
	r.reset()
	if len(l.free) < keepRounds && cap(r.reqs) <= keepRoundSize && cap(r.fwd) <= keepRoundSize {
		l.free = append(l.free, r)
	}
}

// mark puts c on the list of clients to write at the end of this round.
func (l *loop) mark(cl *client) {
	c := cl.fd
	if !c.dirty {
		c.dirty = true
		l.dirty = append(l.dirty, c)
	}
}

// read reads what c's socket has, at most readSize bytes, and takes the
// whole commands in it.
func (l *loop) read(c *fdConn) {
	c.active = l.now
	l.busy.saw(c)
	l.mark(&c.client)
	if len(c.pend) >= readSize {
		l.readLong(c)
		return
	}
	l.in = append(append(l.in[:0], c.pend...), make([]byte, readSize)...)
	framed := len(c.pend)
	n, ok := l.readFD(c, l.in[framed:])
	if !ok {
		return
	}
	data := l.in[:framed+n]
	if cmdStart := l.frame(c, data, framed); !c.closing {
		c.pend = append(c.pend[:0], data[cmdStart:]...)
		if len(c.pend) == 0 && cap(c.pend) > readSize {
			c.pend = nil
		}
	}
}

// resume takes the commands c sent after its blocking command, which
// wait unframed in c.pend, now that it is answered: also after its EOF,
// as Redis answers what a client sent before its end unless it was
// blocked then.
func (l *loop) resume(c *fdConn) {
	if c.view.killed.Load() {
		l.close(c) // what it sent after is dropped: see readFD
		return
	}
	l.mark(&c.client)
	c.closing = false // if at its EOF (ended), until its commands are taken
	c.hungUp = false  // its EOF is read in turn
	cmdStart := l.frame(c, c.pend, 0)
	if !c.closing {
		// Also at its EOF: a subscription command among them waits for
		// those before it (drainFirst), and resumes after them.
		c.pend = append(c.pend[:0], c.pend[cmdStart:]...)
	}
	if c.eof || c.drained {
		c.closing = true
		c.cancelBlocked() // one more among them does not wait either
	}
}

// takeBacklog takes the commands passParts left for this pass, as many
// as the bound lets it again, before those of the clients with events:
// the pass after takes the rest without an event.
func (l *loop) takeBacklog() {
	if len(l.backlog) == 0 {
		return
	}
	cs := l.backlog
	l.backlog = nil
	for _, c := range cs {
		c.backlog = false
		if c.gone {
			continue
		}
		l.busy.saw(c)
		l.mark(&c.client) // written, or closed, in this pass's end
		if !c.closing || c.eof || c.drained {
			// As endRound resumes a client: at its EOF or when its loop
			// drains, what it sent before is still answered.
			l.resume(c)
		}
	}
	clear(cs)
	if l.backlog == nil {
		l.backlog = cs[:0]
	}
}

// readLong reads into c.pend itself, so that each read of a long command
// does not copy what came of it before. The buffer doubles when full, so
// it holds at most twice what arrived (never what the command's header
// announced), and each byte is copied about once as it grows: grown a
// read at a time, append's quarter steps copied a 1 MB value five times
// over and made as much garbage. Reads take up to longRead: a 16 KiB read
// a pass made such a value 64 passes.
func (l *loop) readLong(c *fdConn) {
	framed := len(c.pend)
	if cap(c.pend)-framed < readSize {
		grow := max(framed, readSize)
		if c.f.state == inBulkBody {
			// No more than the argument being read still needs (and a
			// read for what may follow it): the doubling past a 1 MB
			// value's end would allocate, and clear, another MB.
			grow = max(min(grow, int(c.f.left)+readSize), readSize)
		}
		// Not slices.Grow: append's own steps would round it up by a
		// quarter.
		c.pend = append(make([]byte, 0, framed+grow), c.pend...)
	}
	n, ok := l.readFD(c, c.pend[framed:min(cap(c.pend), framed+longRead)])
	if !ok {
		return
	}
	c.pend = c.pend[:framed+n]
	if cmdStart := l.frame(c, c.pend, framed); cmdStart > 0 {
		// The long command is taken: keep what follows it (less than a
		// read), not its buffer, which an idle client would hold on to.
		c.pend = append([]byte(nil), c.pend[cmdStart:]...)
	}
}

// readFD reads into p. It reports false when there was nothing to frame.
// At EOF the client is answered what it sent before, then closed; at an
// error it is closed now, and killed (CLIENT KILL) without a read: Redis
// frees a killed client with what it sent and was not yet read.
func (l *loop) readFD(c *fdConn, p []byte) (int, bool) {
	if c.view.killed.Load() {
		l.close(c)
		return 0, false
	}
	n, err := rawRead(c.fd, p)
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return 0, false
	case err != nil:
		l.close(c)
		return 0, false
	case n == 0:
		l.ended(c)
		return 0, false
	}
	return n, true
}

// ended takes c's EOF: it is answered what it sent before, then closed;
// its blocking commands stop waiting, as Redis frees a blocked client that
// closed.
func (l *loop) ended(c *fdConn) {
	c.closing, c.eof = true, true
	c.cancelBlocked()
	l.mark(&c.client)
}

// frame takes the whole commands in data, of which c's framer has seen
// the first framed bytes, and returns where the unfinished one starts. It
// stops after a blocking command: what follows is taken once that is
// answered (resume).
func (l *loop) frame(c *fdConn, data []byte, framed int) int {
	cmdStart, pos := 0, framed
	parts := c.inFlight() + c.split
	for pos < len(data) && !c.closing && c.block == nil && !c.drainFirst {
		if c.inFlight()+c.split-parts >= passParts {
			// Framed again from cmdStart next pass, as after drainFirst.
			c.backlog = true
			l.backlog = append(l.backlog, c)
			break
		}
		c.f.unauth = c.user == nil // AUTH, taken, lifts the bounds for what follows
		l.argv = l.argv[:0]
		k, whole, split, ferr := c.f.nextArgs(data[pos:], &l.argv)
		pos += k
		if ferr != nil {
			if c.tunnel != nil && c.subs && c.inFlight() > 0 {
				// As a QUIT (subscribesAfter): the error waits until what
				// came before it is answered, then fences the tunnel, so
				// that the message of the client's own PUBLISH answered
				// just now reaches it before the close, as from Redis.
				// Framed again from the start of the command.
				c.f.state = atCommand
				c.drainFirst = true
				break
			}
			if ferr == errQueryBuffer {
				logQueryBuffer(l.s.log, c.addr, c.f.maxQuery)
			}
			l.s.stats.errors.add(protocolErrorCode)
			l.s.fenceReset(&c.client) // before the error's place is chosen
			c.protocolError(ferr.Error())
			break
		}
		if whole {
			raw := data[cmdStart:pos]
			if !l.take(c, raw, split) {
				// Framed again once what came before it is answered.
				c.drainFirst = true
				break
			}
			cmdStart = pos
		}
	}
	return cmdStart
}

// throttleResetName is THROTTLE.RESET's name, compared without a copy.
//
// takeReset: a round with a reset is decided apart from the loop's bucket
// pipes (router.Cluster.SubmitVia), on the router's own connections, so a
// call on those pipes may run before a call of that round that was read
// first. So the resets read in a pass go in a round of their own
// (l.resets), and the others' calls go on the pipes as always: no call but
// a reset waits on one. A reset's client keeps its order around it, as one
// node runs a client's commands in order: the reset is taken once what the
// client sent before it is answered, and what it sent after it once the
// reset is.
var throttleResetName = []byte("throttle.reset")

// take parses one whole command, as framed, and takes it into c's queue;
// split: the framer put its arguments in l.argv already. Redis runs
// nothing for a blank inline line or a multibulk of no arguments, but
// spends a CLIENT REPLY SKIP on it (emptyCommand). It reports false for a
// command that must wait until what c sent before it is answered
// (subscribesAfter, errRouteAgain): not taken.
func (l *loop) take(c *fdConn, raw []byte, split bool) bool {
	ok := true
	switch {
	case split:
	case raw[0] == '*':
		l.argv = splitArgs(l.argv[:0], raw)
	case blank(raw):
		l.argv = l.argv[:0]
	default:
		l.argv, ok = splitInline(l.argv[:0], raw)
	}
	taken := true
	reset := ok && len(l.argv) > 0 && bytes.EqualFold(l.argv[0], throttleResetName)
	switch {
	case !ok && c.tunnel != nil && c.subs && c.inFlight() > 0:
		taken = false // as a framing error (frame)
	case !ok:
		l.s.stats.errors.add(protocolErrorCode)
		l.s.fenceReset(&c.client)
		c.protocolError(errUnbalancedQuotes.Error())
	case len(l.argv) == 0:
		c.emptyCommand()
	case l.s.subscribesAfter(&c.client, l.argv):
		taken = false
	case reset && c.inFlight() > 0:
		taken = false // takeReset
	case reset:
		l.s.take(&c.client, l.pending(&l.resets), l.argv)
		c.drainFirst = true // takeReset
	default:
		l.s.take(&c.client, l.round(), l.argv)
		if c.retake {
			c.retake, taken = false, false
		}
	}
	clear(l.argv) // they point into the client's input
	return taken
}

// flush writes c's replies as far as the socket takes them, then sets what
// epoll watches c for: input while c is under its bounds, room to write
// while replies wait. A closing client is closed once all is written: at
// once after its EOF, else after it lingers.
func (l *loop) flush(c *fdConn) { l.send(c, false) }

// send is flush, but may delay c's replies while more are to come
// (maxDelays).
func (l *loop) send(c *fdConn, mayDelay bool) {
	if !c.lingerEnd.IsZero() {
		return
	}
	delay := mayDelay && c.delays < maxDelays && c.inFlight() > 0 && c.block == nil && !c.closing &&
		c.sent == 0 && len(c.out.b) > 0 && len(c.out.b) < delayBytes
	if delay {
		c.delays++
		l.later = append(l.later, c)
	} else {
		c.delays = 0
	}
	if l.pastLimit(c) {
		return
	}
	for !delay && c.sent < len(c.out.b) {
		n, err := rawWrite(c.fd, c.out.b[c.sent:])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			break
		}
		if err != nil {
			l.close(c)
			return
		}
		c.sent += n
		// As Redis's lastinteraction: a client being answered, or sent
		// messages, is not idle, though the command it waited for was
		// read long ago (for IdleTimeout and CLIENT LIST's idle).
		c.active = l.now
		c.view.last.Store(l.now.UnixNano())
	}
	unsent := len(c.out.b) - c.sent
	if unsent > 0 && c.sent >= readSize && c.sent >= unsent {
		// A client that reads, but never all that waits for it (a
		// subscriber kept a little behind by a steady flood), would
		// otherwise have out keep everything it was ever sent. Moving
		// what is left costs no more than what was written.
		c.out.b, c.sent = c.out.b[:copy(c.out.b, c.out.b[c.sent:])], 0
	}
	if unsent == 0 {
		c.out.b, c.sent = c.out.b[:0], 0
		if cap(c.out.b) > keepReplies {
			c.out.b = nil
		}
		if c.closing && c.inFlight() == 0 {
			if c.eof && !c.fenced && c.tunnel != nil && c.subs {
				// As at a QUIT (fenceReset): the messages its nodes sent
				// before its end, say of its own PUBLISH answered just
				// now, reach it before it is closed, as Redis pushes
				// what it made before it reads the client's EOF. A fence
				// not back in the forward timeout ends the tunnel.
				c.fenced = true
				l.s.fenceReset(&c.client)
			}
		}
		// Not while commands it sent wait to be taken (backlog): at its
		// loop's drain they are still answered.
		if c.closing && c.inFlight() == 0 && !c.backlog {
			if c.eof {
				l.close(c)
			} else {
				l.linger(c)
			}
			return
		}
	}
	var want uint32
	switch {
	case c.closing:
	case c.block != nil:
		// Not read while its blocking command waits, as Redis does not
		// serve a blocked client; but watched for hanging up, which ends
		// the wait.
		want = syscall.EPOLLRDHUP
	case c.drainFirst || c.backlog:
		// Not read until what it sent before is answered, a moment; or
		// until what it sent is taken, next pass.
	case c.inFlight()+c.split < maxInFlight && unsent < l.unsentBound(c):
		want = readable
	}
	if unsent > 0 && !delay {
		want |= syscall.EPOLLOUT
	}
	if want != c.mask {
		c.mask = want
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, c.fd, c.event(want)); err != nil {
			l.close(c)
		}
	}
}

// pastLimit closes c if its replies are past the output limit, or past
// unauthOutputLimit while it is yet to authenticate. As Redis:
// what waits for the client, before the write, so a single reply past the
// hard limit closes it. A subscriber is not of the normal class but of
// Redis's pubsub one (maxPushBacklog), which counts a RESP3 subscriber's
// replies with its messages, as on a goroutine. One subscribed to nothing
// is of the normal class, as in Redis, though it keeps its tunnel.
func (l *loop) pastLimit(c *fdConn) bool {
	lim := l.s.cfg.OutputLimit
	if c.tunnel != nil && c.subs {
		lim = OutputLimit{Hard: maxPushBacklog}
	} else if lim == (OutputLimit{}) && c.user != nil {
		return false
	}
	pending := int64(len(c.out.b) - c.sent + len(c.held.b) - c.heldOff + c.waiting)
	unauth := c.user == nil && min(pending, int64(c.unauthMade)) > unauthOutputLimit
	if !unauth && !lim.over(pending, &c.softOver, l.now) {
		return false
	}
	logOutputLimit(l.s.log, c.addr, pending)
	l.close(c)
	return true
}

// unsentBound is how many bytes of replies its socket has not taken stop
// reading c: maxUnsent, or more under an output limit past it, which
// would otherwise never be reached by a client that sends and never reads
// (unread, it would stay open for good where Redis reads it and closes
// it). A subscriber's messages have their own bound, as in pastLimit.
func (l *loop) unsentBound(c *fdConn) int {
	lim := l.s.cfg.OutputLimit
	if c.tunnel != nil && c.subs {
		return maxUnsent
	}
	return max(maxUnsent, int(max(lim.Hard, lim.Soft))+1)
}

// written is how much of c's output (out) its socket took already.
func (c *fdConn) written() int { return c.sent }

// owesNothing reports whether c waits for no reply and has nothing
// pending in either direction: no command in flight or half read, no
// reply unwritten, no blocking command or subscription.
func (c *fdConn) owesNothing() bool {
	return c.inFlight() == 0 && c.sent == len(c.out.b) && len(c.held.b) == c.heldOff &&
		len(c.pend) == 0 && c.block == nil && c.tunnel == nil
}

// inputWaiting is how many bytes the socket fd holds unread (-1 when it
// cannot tell).
func inputWaiting(fd int) int {
	var n int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return -1
	}
	return int(n)
}

// linger shuts c's write side, its replies written, and watches it for
// input to discard until it closes or lingerTime passes.
func (l *loop) linger(c *fdConn) {
	c.pend = nil // a command over the query buffer limit, say
	if c.tunnel != nil {
		// Redis frees the client once its reply is written: its
		// subscriptions end now, not when it closes its side.
		c.tunnel.Close()
	}
	// Not counted from now: its EOF, next, may be what a caller waits
	// for before it asks INFO.
	l.s.leaving(&c.client)
	c.mask = readable
	if syscall.Shutdown(c.fd, syscall.SHUT_WR) != nil ||
		syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, c.fd, c.event(readable)) != nil {
		l.close(c)
		return
	}
	c.lingerEnd = time.Now().Add(lingerTime)
	l.lingering = append(l.lingering, c)
}

// discardInput reads what a lingering client sent, and closes it at EOF.
func (l *loop) discardInput(c *fdConn) {
	l.in = append(l.in[:0], make([]byte, readSize)...)
	n, err := syscall.Read(c.fd, l.in)
	if err == syscall.EAGAIN || err == syscall.EINTR || (err == nil && n > 0) {
		return
	}
	l.close(c)
}

// closeLingering closes the lingering clients whose time is up.
func (l *loop) closeLingering() {
	if len(l.lingering) == 0 {
		return
	}
	now, k := time.Now(), 0
	for _, c := range l.lingering {
		if !c.gone && now.Before(c.lingerEnd) {
			break
		}
		l.close(c)
		k++
	}
	n := copy(l.lingering, l.lingering[k:])
	clear(l.lingering[n:])
	l.lingering = l.lingering[:n]
}

// readable is what a client under its bounds is watched for.
const readable = syscall.EPOLLIN | syscall.EPOLLRDHUP

// event is c's epoll registration: its id rides in the event's data.
func (c *fdConn) event(events uint32) *syscall.EpollEvent { return idEvent(c.id, events) }

// close closes a client the loop watches.
func (l *loop) close(c *fdConn) {
	if _, ok := l.conns[c.id]; !ok {
		return
	}
	delete(l.conns, c.id)
	c.gone = true
	l.s.countLost(c.q[c.head:], nil, nil)
	c.abortBlocked()
	c.unpin()
	if c.tunnel != nil {
		c.tunnel.Close()
	}
	l.discard(c)
}

// discard closes c's socket and stops counting it.
func (l *loop) discard(c *fdConn) {
	c.view.setKill(nil)
	syscall.Close(c.fd)
	l.s.gone(&c.client)
}

func (l *loop) shutdown() {
	l.mu.Lock()
	l.stopping = true
	for _, c := range l.added {
		l.discard(c)
	}
	l.added = nil
	// A dial that ended after the last wake-up: the loop that would have
	// watched its socket is gone.
	for _, d := range l.dialed {
		if d.fd >= 0 {
			syscall.Close(d.fd)
		}
	}
	l.dialed = nil
	syscall.Close(l.wake)
	l.mu.Unlock()
	for _, c := range l.conns {
		l.close(c)
	}
	l.closeNodes()
	syscall.Close(l.epfd)
	close(l.done)
}
