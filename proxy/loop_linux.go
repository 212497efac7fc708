package proxy

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"
)

// An event loop serves many clients from one goroutine, as Redis does: it
// waits on epoll for the sockets that have bytes, reads each once, sends
// the bucket requests of every pipeline it read to the Decider in one
// batch, and writes each client its replies. Compared with a goroutine per
// client, a request costs no read that finds the socket empty, no park and
// wake of a goroutine, and no round trip of its own to the shards: a round
// carries the requests of all the clients that were ready.

// defaultLoops is a loop per core the Go runtime uses. A round waits for
// the shards, and meanwhile the requests that arrive wait in their sockets
// for the next round, which batches them; with one loop per core, the
// rounds of one loop overlap the waits of another.
func defaultLoops() int { return runtime.GOMAXPROCS(0) }

// keepBuffer is the most a loop keeps of its input and output buffers from
// one round to the next.
const keepBuffer = 1 << 20

// readSize is the most a round reads from one socket; the rest waits for
// the next round, so one client cannot fill a round alone.
const readSize = 16 << 10

// loopable reports whether event loops can serve ln's connections: those
// whose socket can be taken from Go's poller.
func loopable(ln net.Listener) bool {
	switch ln.(type) {
	case *net.TCPListener, *net.UnixListener:
		return true
	}
	return false
}

// serveLoops starts the loops and hands them the clients ln accepts. It is
// called with s.mu held and unlocks it.
func (s *Server) serveLoops(ln net.Listener) error {
	for range s.cfg.Loops {
		l, err := s.newLoop()
		if err != nil {
			for _, l := range s.loops {
				l.stop()
			}
			s.loops = nil
			s.mu.Unlock()
			ln.Close()
			return err
		}
		s.loops = append(s.loops, l)
		go l.run()
	}
	loops := s.loops
	s.mu.Unlock()

	backoff := time.Duration(0)
	for i := 0; ; i++ {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				for _, l := range loops {
					l.stop()
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.loopErr
			}
			// Out of descriptors, say: the clients already served go on.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accepting a client", zap.Error(err), zap.Duration("retry_in", backoff))
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		addr := nc.RemoteAddr().String()
		fd, err := takeSocket(nc)
		if err != nil {
			s.log.Warn("taking a client's socket", zap.String("addr", addr), zap.Error(err))
			continue
		}
		c := &fdConn{client: s.newClient(addr), fd: fd, f: s.newFramer()}
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
	ln := s.ln
	s.mu.Unlock()
	ln.Close()
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
	fd int
	id uint64 // the loop's name for it in epoll events; fds are reused
	f  framer

	pend    []byte // the start of a command not yet whole, already framed
	pendOff int    // bytes of pend whose commands are queued: dropped at the next read
	perr    string // what is not RESP in its input, answered after the commands before it
	backlog []byte // replies the socket has not taken yet
	writing bool   // watched for room to write, not for reading, until then
	closing bool   // close once the replies are written
}

type loop struct {
	s    *Server
	epfd int
	wake int // an eventfd: clients were added, or the loop must stop

	mu       sync.Mutex
	added    []*fdConn
	stopping bool
	done     chan struct{}

	// Owned by the loop's goroutine.
	conns  map[uint64]*fdConn
	lastID uint64
	events [128]syscall.EpollEvent
	in     []byte    // what this round read, from all its clients
	argv   [][]byte  // the arguments of this round's commands, into in
	ready  []*fdConn // clients with bucket requests this round
	local  []*fdConn // clients with only commands sluice answers itself
	b      batch
	out    replyBuf
}

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
	l := &loop{s: s, epfd: epfd, wake: int(r), done: make(chan struct{}), conns: make(map[uint64]*fdConn)}
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

// poke wakes the loop up; l.mu is held, so that the eventfd is open.
func (l *loop) poke() {
	one := [8]byte{1}
	syscall.Write(l.wake, one[:]) // EAGAIN: a wake-up is pending anyway
}

func (l *loop) run() {
	defer l.shutdown()
	for {
		n, err := syscall.EpollWait(l.epfd, l.events[:], -1)
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			l.s.loopFailed(err)
			return
		}
		for _, ev := range l.events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				if !l.adopt() {
					return
				}
				continue
			}
			c := l.conns[id]
			if c == nil {
				continue // closed earlier this round
			}
			if c.writing {
				l.flush(c) // room to write, or an error that the write finds
				continue
			}
			l.read(c)
		}
		// Clients with nothing to decide do not wait for the shards.
		for _, c := range l.local {
			l.reply(c)
		}
		l.b.decide(l.s.ctx, l.s.cfg.Decider)
		for _, c := range l.ready {
			l.reply(c)
		}
		l.endRound()
	}
}

// endRound lets go of a round's clients, requests and bytes.
func (l *loop) endRound() {
	clear(l.local) // let closed clients go
	clear(l.ready)
	l.local, l.ready = l.local[:0], l.ready[:0]
	l.b.reset()
	clear(l.argv) // let a round's big reads go
	l.argv = l.argv[:0]
	// Keep the buffers an ordinary round needs, not a rare big one's.
	l.in = l.in[:0]
	if cap(l.in) > keepBuffer {
		l.in = nil
	}
	if cap(l.out.b) > keepBuffer {
		l.out.b = nil
	}
}

// adopt registers the clients handed over since the last wake-up. It
// reports false when the loop must stop.
func (l *loop) adopt() bool {
	var buf [8]byte
	syscall.Read(l.wake, buf[:])
	l.mu.Lock()
	added, stopping := l.added, l.stopping
	l.added = nil
	l.mu.Unlock()
	for _, c := range added {
		l.lastID++
		c.id = l.lastID
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, c.fd, c.event(readable)); err != nil {
			l.s.log.Warn("watching a client's socket", zap.String("addr", c.addr), zap.Error(err))
			l.discard(c)
			continue
		}
		l.conns[c.id] = c
	}
	return !stopping
}

// read reads what c's socket has, at most readSize bytes, and queues the
// whole commands in it. Their arguments point into l.in, or into c.pend
// for a long command, until the round ends.
func (l *loop) read(c *fdConn) {
	if c.pendOff > 0 {
		// Last round's whole commands are answered: drop them.
		rest := c.pend[c.pendOff:]
		if cap(c.pend) > 4*readSize && len(rest) < readSize {
			c.pend = append([]byte(nil), rest...) // do not keep a long command's buffer
		} else {
			c.pend = c.pend[:copy(c.pend, rest)]
		}
		c.pendOff = 0
	}
	if len(c.pend) >= readSize {
		l.readLong(c)
		return
	}
	start := len(l.in)
	l.in = append(l.in, c.pend...)
	framed := len(l.in)
	if cap(l.in)-framed < readSize {
		// Earlier clients' arguments keep pointing into the old array.
		grown := make([]byte, framed, 2*cap(l.in)+readSize)
		copy(grown[start:], l.in[start:])
		l.in = grown
	}
	n, ok := l.readFD(c, l.in[framed:framed+readSize])
	if !ok {
		l.in = l.in[:start]
		return
	}
	l.in = l.in[:framed+n]
	data := l.in[start:]
	if cmdStart := l.frame(c, data, framed-start); c.perr == "" && !c.closing {
		c.pend = append(c.pend[:0], data[cmdStart:]...)
		if len(c.pend) == 0 && cap(c.pend) > readSize {
			c.pend = nil
		}
	}
}

// readLong reads into c.pend itself, so that each read of a long command
// does not copy what came of it before.
func (l *loop) readLong(c *fdConn) {
	framed := len(c.pend)
	c.pend = slices.Grow(c.pend, readSize)
	n, ok := l.readFD(c, c.pend[framed:framed+readSize])
	if !ok {
		return
	}
	c.pend = c.pend[:framed+n]
	// The commands that end here are answered before the next read
	// compacts c.pend.
	c.pendOff = l.frame(c, c.pend, framed)
}

// readFD reads into p. It reports false when there was nothing to frame; c
// is closed if the client is gone.
func (l *loop) readFD(c *fdConn, p []byte) (int, bool) {
	n, err := syscall.Read(c.fd, p)
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return 0, false
	case err != nil || n == 0:
		// EOF or a reset. What came before it was answered last round.
		l.close(c)
		return 0, false
	}
	return n, true
}

// frame queues the whole commands in data, of which c's framer has seen
// the first framed bytes, and returns where the unfinished one starts.
func (l *loop) frame(c *fdConn, data []byte, framed int) int {
	reqs := len(l.b.reqs)
	cmdStart, pos := 0, framed
	for pos < len(data) {
		k, whole, ferr := c.f.next(data[pos:])
		pos += k
		if ferr != nil {
			c.perr = ferr.Error()
			break
		}
		if whole {
			raw := data[cmdStart:pos]
			cmdStart = pos
			if !l.queue(c, raw) {
				break
			}
		}
	}
	switch {
	case len(l.b.reqs) > reqs:
		l.ready = append(l.ready, c)
	case len(c.pipe) > 0 || c.perr != "":
		l.local = append(l.local, c)
	}
	return cmdStart
}

// queue parses one whole command, as framed, into c's pipeline. It reports
// false when nothing after it may run.
func (l *loop) queue(c *fdConn, raw []byte) bool {
	var args [][]byte
	if raw[0] == '*' {
		start := len(l.argv)
		var ok bool
		if l.argv, ok = splitArgs(l.argv, raw); !ok {
			c.perr = "invalid bulk length"
			return false
		}
		args = l.argv[start:len(l.argv):len(l.argv)]
	} else {
		if blank(raw) {
			return true // Redis ignores empty inline lines
		}
		cmd, err := redcon.Parse(raw) // quotes and escapes, as redcon reads them
		if err != nil {
			c.perr = strings.TrimPrefix(err.Error(), "Protocol error: ")
			return false
		}
		args = cmd.Args
	}
	if !l.s.queue(&c.client, &l.b, args) {
		c.closing = true
		return false
	}
	return true
}

func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// reply writes c's replies for this round.
func (l *loop) reply(c *fdConn) {
	l.render(c)
	c.backlog = l.out.b
	l.flush(c)
	// The loop's buffer goes back to the loop; what is left is c's.
	if len(c.backlog) > 0 {
		c.backlog = append([]byte(nil), c.backlog...)
	} else {
		c.backlog = nil
	}
	l.out.b = l.out.b[:0]
}

// render writes c's replies for this round into l.out.
func (l *loop) render(c *fdConn) {
	l.out.b, l.out.quit = l.out.b[:0], false
	l.s.answer(&c.client, &l.out, &l.b)
	if c.perr != "" {
		l.out.b = appendProtocolError(l.out.b, c.perr)
		c.closing = true
	}
	c.closing = c.closing || l.out.quit
}

// flush writes c's backlog as far as the socket takes it. Until it is all
// written, c is watched for room to write instead of for reading.
func (l *loop) flush(c *fdConn) {
	for len(c.backlog) > 0 {
		n, err := syscall.Write(c.fd, c.backlog)
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
		c.backlog = c.backlog[n:]
	}
	if len(c.backlog) == 0 {
		c.backlog = nil
	}
	switch {
	case len(c.backlog) == 0 && c.closing:
		l.close(c)
	case len(c.backlog) > 0 && !c.writing:
		c.writing = true
		l.watch(c, syscall.EPOLLOUT)
	case len(c.backlog) == 0 && c.writing:
		c.writing = false
		l.watch(c, readable)
	}
}

func (l *loop) watch(c *fdConn, events uint32) {
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, c.fd, c.event(events)); err != nil {
		l.close(c)
	}
}

// readable is what a client that is not waiting to write is watched for.
const readable = syscall.EPOLLIN | syscall.EPOLLRDHUP

// event is c's epoll registration: its id rides in the event's data.
func (c *fdConn) event(events uint32) *syscall.EpollEvent {
	return &syscall.EpollEvent{Events: events, Fd: int32(uint32(c.id)), Pad: int32(uint32(c.id >> 32))}
}

// close closes a client the loop watches.
func (l *loop) close(c *fdConn) {
	if _, ok := l.conns[c.id]; !ok {
		return
	}
	delete(l.conns, c.id)
	l.discard(c)
}

// discard closes c's socket and stops counting it.
func (l *loop) discard(c *fdConn) {
	syscall.Close(c.fd)
	l.s.stats.connected.Add(-1)
}

func (l *loop) shutdown() {
	l.mu.Lock()
	l.stopping = true
	for _, c := range l.added {
		l.discard(c)
	}
	l.added = nil
	syscall.Close(l.wake)
	l.mu.Unlock()
	for _, c := range l.conns {
		l.close(c)
	}
	syscall.Close(l.epfd)
	close(l.done)
}

// replyBuf is a client's share of a loop's output, with redcon's encoding.
type replyBuf struct {
	b    []byte
	quit bool
}

func (r *replyBuf) WriteArray(n int)         { r.b = redcon.AppendArray(r.b, n) }
func (r *replyBuf) WriteInt(n int)           { r.b = redcon.AppendInt(r.b, int64(n)) }
func (r *replyBuf) WriteInt64(n int64)       { r.b = redcon.AppendInt(r.b, n) }
func (r *replyBuf) WriteError(msg string)    { r.b = redcon.AppendError(r.b, msg) }
func (r *replyBuf) WriteString(s string)     { r.b = redcon.AppendString(r.b, s) }
func (r *replyBuf) WriteBulk(b []byte)       { r.b = redcon.AppendBulk(r.b, b) }
func (r *replyBuf) WriteBulkString(s string) { r.b = redcon.AppendBulkString(r.b, s) }
func (r *replyBuf) WriteNull()               { r.b = redcon.AppendNull(r.b) }
func (r *replyBuf) Close() error             { r.quit = true; return nil }
