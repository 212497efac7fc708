package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"
)

// This file serves each client on its own goroutine, with redcon's server:
// for listeners an event loop cannot take (see loopable), and with
// Config.Loops -1.

// goClient is a client served on its own goroutine, with its own round.
type goClient struct {
	client
	r       round
	cut     bool        // closed past the hard output limit: nothing more is written
	early   *time.Timer // a round's earlyWrite
	mu      sync.Mutex  // guards decided
	decided [][]int     // results in, not yet delivered
	wake    chan struct{}
	// The hard output limit while a round waits: a write of the replies
	// ready early (writeReady) blocks while the client reads nothing, and
	// the rest of the round's replies pile up behind it. So as they come
	// in, those past hard (0: no limit now) close the client, as a loop
	// closes it: pending counts the round's reply bytes, those rendered
	// before it was submitted and those forwarded as they came, less what
	// writeReady wrote.
	hard    atomic.Int64
	pending atomic.Int64
	over    atomic.Bool // closed for it: nothing more is written
}

// socketFD is the descriptor of the socket under nc (its TLS and framing
// layers taken off), as CLIENT LIST's fd shows it; -1 for a connection
// that has none (a net.Pipe in a test).
func socketFD(nc net.Conn) int {
	for {
		switch c := nc.(type) {
		case *framedConn:
			nc = c.Conn
			continue
		case *tls.Conn:
			nc = c.NetConn()
			continue
		}
		break
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if raw.Control(func(s uintptr) { fd = int(s) }) != nil {
		return -1
	}
	return fd
}

func (s *Server) accept(conn redcon.Conn) bool {
	nc := conn.NetConn()
	c := &goClient{client: s.newClient(conn.RemoteAddr(), nc.LocalAddr(), socketFD(nc)), wake: make(chan struct{}, 1)}
	c.conn, _ = nc.(*framedConn)
	// Closed under redcon, whose read then fails and lets the client go;
	// at once, without a TLS close_notify, whose write could hold the
	// killer's goroutine (an event loop's) for a client that reads
	// nothing.
	if c.conn != nil {
		c.view.setKill(func() { c.conn.cut() })
	} else {
		c.view.setKill(func() { nc.Close() })
	}
	if c.conn != nil {
		c.conn.cl = &c.client
		c.conn.left = func() { s.leaving(&c.client) }
		c.conn.atEOF = func() { s.fenceAtEOF(c) }
	}
	c.r.done = func(idx []int) {
		// Before the results are handed over: the round is the client's
		// again once they are.
		if hard := c.hard.Load(); hard > 0 {
			n := 0
			for _, i := range idx {
				if j := i - len(c.r.reqs); j >= 0 {
					n += len(c.r.replies[j])
				}
			}
			if p := c.pending.Add(int64(n)); p > hard && c.over.CompareAndSwap(false, true) {
				logOutputLimit(s.log, c.addr, p)
				// Ends a write that blocks. Maybe on a node connection's
				// reader: at once.
				if c.conn != nil {
					c.conn.cut()
				} else {
					nc.Close()
				}
			}
		}
		c.mu.Lock()
		c.decided = append(c.decided, idx)
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default: // a wake-up is pending
		}
	}
	conn.SetContext(c)
	return true
}

// earlyWrite is how long a goroutine client's round keeps replies that
// are ready waiting for the rest: every earlyWrite, those that come before
// the first undecided command are written, so that a slow shard or a slow
// forwarded command delays only the replies after its own. Not as soon as
// they are ready, as a loop writes them before it sleeps: a goroutine has
// no other client to serve meanwhile, and a pipeline decided on three
// shards would be written in three parts, each a TLS record (20% more CPU
// a decision at -P 16 with 1 ms, where a loaded round takes about 6 ms).
const earlyWrite = 10 * time.Millisecond

// wait delivers the round's results as they come in, until all are, and
// writes those ready ahead of the undecided ones earlyWrite after the
// round began or results came in. Once they are written, the timer waits
// for the next results: nothing else makes a reply ready, and a blocking
// command may wait for good (a timer every earlyWrite meanwhile cost 15
// times the CPU of an idle blocked client).
func (s *Server) wait(conn redcon.Conn, c *goClient) {
	m := s.metrics
	if c.early == nil {
		c.early = time.NewTimer(earlyWrite)
	} else {
		c.early.Reset(earlyWrite)
	}
	armed := true
	defer c.early.Stop()
	for {
		select {
		case <-c.wake:
		case <-c.early.C:
			armed = false
			s.writeReady(conn, c)
			continue
		}
		c.mu.Lock()
		got := c.decided
		c.decided = nil
		c.mu.Unlock()
		now := time.Now()
		for _, idx := range got {
			if n := c.r.decisions(idx); n > 0 {
				m.observe(c.r.start, now, n)
			}
			if c.r.deliver(idx, func(*client) {}) {
				c.r.reset()
				return
			}
		}
		if c.over.Load() {
			// Closed past its output limit while the round waits: its
			// replies are never written, and kept in their slots until
			// the round's last is in, a pipeline of big reads would be
			// held whole for a client Redis would have freed.
			c.dropReplies()
		}
		if !armed && len(got) > 0 {
			c.early.Reset(earlyWrite)
			armed = true
		}
	}
}

// dropReplies lets go of the forwarded replies c's slots hold.
func (c *goClient) dropReplies() {
	for i := c.head; i < len(c.q); i++ {
		c.waiting -= len(c.q[i].raw)
		c.q[i].raw = nil
	}
}

// writeReady writes the replies of c that no undecided command holds
// back, while its round waits for the others.
func (s *Server) writeReady(conn redcon.Conn, c *goClient) {
	if c.cut || c.push != nil {
		return // a subscriber's writer orders its replies and pushes
	}
	s.drain(&c.client)
	if len(c.out.b) == 0 || s.pastHardLimit(conn, c) {
		return
	}
	conn.WriteRaw(c.out.b)
	if redcon.BaseWriter(conn).Flush() == nil {
		c.pending.Add(-int64(len(c.out.b)))
	}
	c.out.b = c.out.b[:0]
}

func (s *Server) closedConn(conn redcon.Conn, err error) {
	// redcon calls closed only for a connection accept took, and accept
	// always sets its goClient.
	c := conn.Context().(*goClient)
	if c.conn != nil {
		c.conn.uncount()
	}
	s.gone(&c.client)
	c.unpin() // its WATCH ends with it
	if c.tunnel != nil {
		c.tunnel.Close()
	}
	if c.push != nil {
		c.push.close()
	}
	switch {
	case errors.Is(err, errQueryBuffer):
		logQueryBuffer(s.log, conn.RemoteAddr(), orDefault(s.cfg.QueryBufferLimit, defaultQueryBufferLimit))
	case errors.Is(err, errHandshake) && !isClosedConn(err) && !saidNothing(err):
		// As Redis's "Error accepting a client connection", a warning: a
		// client refused its certificate, or speaking plain RESP, is
		// otherwise refused without a word at the default level.
		s.log.Warn("client refused: TLS handshake failed", zap.String("addr", conn.RemoteAddr()), zap.Error(err))
	case err != nil && !errors.Is(err, errProtocolClosed) && !isClosedConn(err):
		s.log.Debug("client connection ended", zap.String("addr", conn.RemoteAddr()), zap.Error(err))
	}
}

// saidNothing reports whether a handshake failed for a client that went
// away, or stayed silent until its deadline, before it said anything
// wrong: a TCP health check, a port scan, or a drain. Not worth a warning.
func saidNothing(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrDeadlineExceeded)
}

func isClosedConn(err error) bool {
	return strings.Contains(err.Error(), "use of closed network connection") ||
		strings.Contains(err.Error(), "connection reset by peer")
}

// serveRESP handles a whole pipeline: redcon calls it with the first command
// of what one read brought, and it takes the rest itself, so that all bucket
// requests of the pipeline go to the Decider in one round. The goroutine
// waits for the round, which holds up only this client; its replies go out
// in order, as on a loop.
func (s *Server) serveRESP(conn redcon.Conn, first redcon.Command) {
	c := conn.Context().(*goClient)
	if c.view.killed.Load() {
		// What it sent before its kill, read ahead of the close: Redis
		// frees a killed client with its query buffer.
		conn.Close()
		return
	}
	s.busy.Add(1)
	defer s.busy.Add(-1)
	if c.conn != nil {
		c.conn.uncount() // counted by the pipeline now
	}
	if c.push != nil {
		if subscribed, ok := c.push.begin(); ok {
			c.subscribedNow(subscribed)
		}
	}
	c.r.start = time.Now()
	more := s.takeNext(c, first.Args)
	var rest []redcon.Command
	if more {
		rest = conn.ReadPipeline()
	}
	for more {
		if c.block != nil && !s.serveBlocking(conn, c) {
			break
		}
		if len(rest) == 0 {
			break
		}
		if c.drainFirst || s.subscribesAfter(&c.client, rest[0].Args) {
			// What it sent before is answered before the next is taken;
			// past the hard limit it is closed first, as on a loop.
			s.answer(conn, c)
			if c.cut || s.pastHardLimit(conn, c) {
				return
			}
			c.r.start = time.Now()
		}
		more = s.takeNext(c, rest[0].Args)
		if c.retake {
			// Taken again once what it sent before is answered.
			c.retake, c.drainFirst = false, true
			continue
		}
		rest = rest[1:]
	}
	if c.cut {
		return
	}
	s.answer(conn, c)
	if c.cut || s.pastHardLimit(conn, c) {
		return
	}
	if c.push != nil {
		c.push.flush(c.out.b)
		// A subscriber is never idle, as in Redis.
		if c.tunnel == nil {
			// RESET left it without a tunnel: it is a normal client
			// again, whose writes the idle timeout and the soft output
			// limit bound (framedConn.Write), as on a loop.
			c.push.stop()
			c.push = nil
			c.conn.idle = s.cfg.IdleTimeout
		} else if !c.subs {
			// Subscribed to nothing, it is no subscriber: Redis times it
			// out. Its writer stays, for a SUBSCRIBE to come.
			c.conn.idle = s.cfg.IdleTimeout
		} else if c.conn.idle > 0 {
			c.conn.idle = 0
			c.conn.SetReadDeadline(time.Time{})
		}
	} else {
		conn.WriteRaw(c.out.b)
		// Written here rather than by redcon once this returns: Shutdown
		// waits for busy pipelines only, and would close the client in
		// the middle of its replies.
		redcon.BaseWriter(conn).Flush()
	}
	c.out.b = c.out.b[:0]
	if cap(c.out.b) > keepReplies {
		c.out.b = nil
	}
	if !c.closing && c.conn != nil && c.conn.buffered() {
		// Commands it sent are read, not yet handed to redcon: it stays
		// busy until they are, so that a Shutdown begun meanwhile
		// answers them before it closes it (framedConn.Read).
		c.conn.count()
		return
	}
	if c.closing || s.isDraining() {
		// After QUIT, or while the server shuts down: the replies go out
		// before the close, and the input left is discarded rather than
		// reset away.
		if c.tunnel != nil {
			// Its replies are written (flush): as Redis frees the
			// client then, its subscriptions end now, not when it
			// closes its side.
			c.tunnel.Close()
		}
		if c.conn != nil {
			c.conn.linger()
		}
		conn.Close()
	}
}

// fenceAtEOF has a subscriber that ended its side (or sent what is not
// RESP, before the error is written) fence its tunnel, as a QUIT does
// (fenceReset), and be written what the tunnel sent until the
// fence is answered before it is closed: the messages its nodes sent
// before its end, say of its own PUBLISH answered just now, as Redis
// pushes what it made before it reads the client's EOF. A fence not back
// in the forward timeout ends the tunnel. redcon's goroutine, between
// pipelines (framedConn.Read).
func (s *Server) fenceAtEOF(c *goClient) {
	if c.tunnel == nil || !c.subs || c.push == nil || len(c.tunnelWait) > 0 {
		return
	}
	c.push.begin()
	s.fenceReset(&c.client)
	if n := len(c.tunnelWait); n > 0 {
		chunks, _ := c.push.answered(n)
		for _, data := range chunks {
			c.pushed = data
			c.tunnelAnswered()
		}
	}
	s.drain(&c.client)
	c.push.flush(c.out.b)
	c.out.b = c.out.b[:0]
}

// takeNext takes args, the next command redcon read, after the empty
// commands before it, which the framer did not hand on.
func (s *Server) takeNext(c *goClient, args [][]byte) bool {
	if c.conn != nil && c.conn.emptyBefore() {
		c.emptyCommand()
	}
	more := s.take(&c.client, &c.r, args)
	if c.conn != nil && !c.retake {
		c.conn.taken++
	}
	return more
}

// answer waits for the replies to what c's round took, and drains them.
func (s *Server) answer(conn redcon.Conn, c *goClient) {
	if len(c.r.reqs)+len(c.r.fwd) > 0 {
		if hard := s.cfg.OutputLimit.Hard; hard > 0 && c.tunnel == nil && c.push == nil {
			c.pending.Store(int64(len(c.out.b) + len(c.held.b) - c.heldOff))
			c.hard.Store(hard)
			defer c.hard.Store(0)
		}
		c.r.submit(s.ctx, s.cfg.Decider, s.cfg.Forwarder, nil)
		s.wait(conn, c)
	}
	if n := len(c.tunnelWait); n > 0 {
		// Its commands sent through the tunnel: their slots take what it
		// sent until each was answered. Should the tunnel end first, the
		// client is closed.
		chunks, subscribed := c.push.answered(n)
		for _, data := range chunks {
			c.pushed = data
			c.tunnelAnswered()
		}
		// As the tunnel answered, rather than at the next pipeline: a
		// command taken after these (drainFirst) is refused or served by
		// it. Unless the last answer closed a RESET's tunnel: the client
		// has no subscription then, whatever the tunnel said before its
		// RESET was answered (in subscribed mode without a tunnel, its
		// next command dereferenced a nil one).
		if c.tunnel != nil {
			c.subscribedNow(subscribed)
		}
	}
	s.drain(&c.client)
	// All it sent is answered: the next pipeline's commands wait for
	// nothing.
	c.drainFirst = false
}

// pastHardLimit closes c, dropping its replies, if they are past the hard
// output limit. Writes block here, so replies never wait long: only the
// hard limit applies (a batch of replies past it). A subscriber's is
// Redis's pubsub class's, maxPushBacklog, as on a loop: Redis counts a
// RESP3 subscriber's replies with its messages. One subscribed to nothing
// is of the normal class again, as in Redis.
func (s *Server) pastHardLimit(conn redcon.Conn, c *goClient) bool {
	hard := s.cfg.OutputLimit.Hard
	if c.tunnel != nil && c.subs {
		hard = maxPushBacklog
	}
	if c.over.Load() {
		// Closed while its round waited (accept's done).
	} else if hard <= 0 || int64(len(c.out.b)) <= hard {
		return false
	} else {
		logOutputLimit(s.log, c.addr, int64(len(c.out.b)))
	}
	c.out.b = c.out.b[:0]
	c.cut = true
	conn.Close()
	return true
}

// serveBlocking answers the commands c sent before its blocking one,
// writes their replies, as Redis does before the client blocks, then sends
// the blocking command and waits for its reply: the rest of the pipeline
// is taken after it. It reports false when the client is being closed
// instead (its tunnel ended before answering what came first, or it went
// away during the wait).
func (s *Server) serveBlocking(conn redcon.Conn, c *goClient) bool {
	s.answer(conn, c)
	if c.cut || s.pastHardLimit(conn, c) {
		return false // as a loop closes it before the command waits
	}
	if c.push == nil {
		conn.WriteRaw(c.out.b)
		redcon.BaseWriter(conn).Flush()
	} else {
		// Through its writer, with what its tunnel sent; and what the
		// tunnel sends during the wait goes out at once, as Redis pushes
		// messages to a blocked client.
		c.push.flush(c.out.b)
	}
	c.out.b = c.out.b[:0]
	if !c.blockTurn() {
		return false
	}
	c.r.sendBlocking(&c.client)
	stop := func() {}
	if c.conn != nil {
		// As a loop watches a blocked client for hanging up (and Redis
		// does), which ends the command's wait at the node.
		b := c.block.f.Blocked
		stop = watchHangUp(c.conn.Conn, func(reset bool) {
			if reset {
				b.Abort() // no answer can reach it
			} else {
				b.Cancel()
			}
		})
	}
	forget := s.watchBlocked(c.block.f.Blocked) // Shutdown ends it
	s.answer(conn, c)
	forget()
	stop()
	if c.push != nil {
		// The rest of the pipeline is served: what the tunnel sends now
		// waits behind its replies again.
		if subscribed, ok := c.push.begin(); ok {
			c.subscribedNow(subscribed)
		}
	}
	b := c.block.f.Blocked
	c.unblocked()
	if b.Ended() {
		// Redis frees a blocked client that goes away: unanswered, and
		// what it sent after the command does not run.
		c.out.b = c.out.b[:0]
		c.closing = true
		return false
	}
	c.r.start = time.Now()
	return true
}

// pushOut is a goroutine client's output once it subscribes. Its
// tunnel's messages come at any time, from the tunnel's goroutine, while
// the client's own goroutine may be blocked reading it; so a writer
// goroutine of its own writes both, each pipeline's replies first and what
// the tunnel sent meanwhile after them, as a loop orders them. Clients
// that never subscribe never have one: their replies are written as
// before. redcon's loop goes on reading the client, through its framer
// and a pipeline at a time, as for any client: only writing needs a
// second goroutine, so the connection is not detached (Detach, as
// redcon.PubSub uses it, would hand sluice the reading too, one command
// at a time, past redcon's closed callback).
type pushOut struct {
	conn *framedConn
	view *clientView
	log  *zap.Logger
	addr string
	idle time.Duration // --timeout, for a client subscribed to nothing

	mu   sync.Mutex // guards the fields below
	cond sync.Cond  // out has bytes, some were written, or closed
	// serving is set while a pipeline is served: what the tunnel sends
	// waits in held, behind that pipeline's replies, but for what it sent
	// until it answered the pipeline's commands sent through it: answers
	// are where in held each was answered, which the pipeline takes.
	serving bool
	held    []byte
	answers []int
	out     []byte // for the writer, in order
	// queued and written count the bytes ever put in out and written: a
	// pipeline's replies are out once written reaches what queued was.
	queued, written int64
	// subscribed is whether the client has a subscription, as its tunnel
	// last reported; the client's goroutine takes it at its next
	// pipeline when reported is set, as a loop takes it at once.
	subscribed, reported bool
	// ended is set once the tunnel ended: the client is closed when what
	// it is sent, the errors its commands were answered, is written.
	ended  bool
	closed bool
	// stopped: the client has no tunnel left, and its writer ends with
	// the connection open.
	stopped bool
}

// pushTo is the tunnel callbacks of goroutine client c, starting its
// writer at its first subscription (inside a pipeline: serving).
func (s *Server) pushTo(c *client) (onData func([]byte, bool, bool), onEnd func(error)) {
	p := c.push
	if p == nil {
		p = &pushOut{conn: c.conn, view: c.view, log: s.log, addr: c.addr, idle: s.cfg.IdleTimeout, serving: true}
		p.cond.L = &p.mu
		c.push = p
		go p.write()
	}
	// A closed tunnel calls neither again: after a RESET, what the next
	// one sends is all there is.
	return p.push, func(error) { p.end() }
}

// push takes what the tunnel sent.
func (p *pushOut) push(data []byte, subscribed, answered bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if p.queued-p.written+int64(len(p.held)+len(data)) > maxPushBacklog {
		p.log.Warn("closing a subscriber that does not read its messages", zap.String("addr", p.addr))
		// Cut first: over TLS, closing would write the close_notify
		// alert to a client that reads nothing, up to 5 s under p.mu.
		p.conn.cut()
		p.closeLocked()
		return
	}
	p.subscribed, p.reported = subscribed, true
	if p.serving {
		p.held = append(p.held, data...)
		if answered {
			p.answers = append(p.answers, len(p.held))
			p.cond.Broadcast()
		}
		return
	}
	p.out = append(p.out, data...)
	p.queued += int64(len(data))
	p.cond.Broadcast()
}

// drop forgets what the client's tunnel, which RESET closed, sent during
// the pipeline, and its end: the client lost no subscription.
func (p *pushOut) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held, p.answers, p.reported, p.ended = nil, nil, false, false
}

// answered waits until the tunnel answered the pipeline's n commands sent
// through it, and takes what it sent until each answer; nil if the
// tunnel ended first. subscribed is whether the client has a subscription,
// as the tunnel last said.
func (p *pushOut) answered(n int) (chunks [][]byte, subscribed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.answers) < n && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return nil, p.subscribed
	}
	chunks = make([][]byte, n)
	at := 0
	for i, end := range p.answers[:n] {
		chunks[i] = bytes.Clone(p.held[at:end])
		at = end
	}
	p.held = append(p.held[:0], p.held[at:]...)
	rest := p.answers[n:]
	for i := range rest {
		rest[i] -= at
	}
	p.answers = append(p.answers[:0], rest...)
	return chunks, p.subscribed
}

// begin marks a pipeline served, and reports whether the client has a
// subscription if its tunnel said so since the last one.
func (p *pushOut) begin() (subscribed, reported bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serving = true
	subscribed, reported, p.reported = p.subscribed, p.reported, false
	return subscribed, reported
}

// flush writes a pipeline's replies and then what the tunnel sent while it
// was served, and waits until they are written: replies keep the
// backpressure of a client served without a tunnel.
func (p *pushOut) flush(replies []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serving = false
	p.out = append(append(p.out, replies...), p.held...)
	p.queued += int64(len(replies) + len(p.held))
	p.held = p.held[:0]
	if cap(p.held) > keepReplies {
		p.held = nil
	}
	p.cond.Broadcast()
	for target := p.queued; p.written < target && !p.closed; {
		p.cond.Wait()
	}
}

// end closes the client once what it is sent is written: its tunnel
// ended, as a client of a Redis node that went away would be.
func (p *pushOut) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	p.cond.Broadcast()
}

// stop ends the writer once all is written (flush), and leaves the client
// open: it has no tunnel left, so nothing more comes to write.
func (p *pushOut) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.cond.Broadcast()
}

// close stops the writer, and closes the client; what is not written yet
// is dropped.
func (p *pushOut) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
}

func (p *pushOut) closeLocked() {
	if !p.closed {
		p.closed = true
		p.conn.Close()
		p.cond.Broadcast()
	}
}

func (p *pushOut) write() {
	var buf []byte
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for len(p.out) == 0 && !p.closed {
			if p.stopped {
				return
			}
			if p.ended && !p.serving {
				p.closeLocked()
				return
			}
			p.cond.Wait()
		}
		if p.closed {
			return
		}
		buf, p.out = p.out, buf[:0]
		subscribed := p.subscribed
		p.mu.Unlock()
		// Past framedConn.Write's bounds: a subscriber is never idle, and
		// its backlog has a bound of its own (maxPushBacklog). One
		// subscribed to nothing is a normal client, bound as one.
		var err error
		if subscribed {
			_, err = p.conn.Conn.Write(buf)
		} else {
			_, err = p.conn.writeBounded(buf, p.idle, 0)
		}
		p.view.wrote()
		p.mu.Lock()
		p.written += int64(len(buf))
		if cap(buf) > keepReplies {
			buf = nil
		}
		if err != nil {
			p.closeLocked()
		}
		p.cond.Broadcast()
	}
}
