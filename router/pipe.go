package router

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/reply"
)

// Pipes are the connections to the nodes that an event loop owns, in its
// own epoll set. Forwarded commands that may share a connection go on them:
// no goroutine, lock or wake-up stands between a command and its node, as
// in the C proxies (twemproxy, predixy).
type Pipes interface {
	// Pipe is the loop's connection to the node at addr, of one protocol,
	// reading from a replica or not; the loop writes what is sent on it
	// at the end of its pass.
	Pipe(addr string, resp3, readonly bool) *Pipe
	// BucketPipe is the loop's connection to the node at addr for bucket
	// steps, apart from forwarded commands, whose slowness (a long KEYS,
	// say) must not make the shard look hung.
	BucketPipe(addr string) *Pipe
	// HotCalls is the loop's coalescer of hot keys' calls.
	HotCalls() *HotCalls
}

// Pipe is the protocol of one pipelined connection to a node, without its
// input and output, which the event loop that owns the socket does: it
// writes Out, says how much went with Wrote, reads into ReadBuf and says
// how much came with Feed. Commands are matched to replies first in, first
// out, as on a backend. A Pipe belongs to its loop's goroutine.
type Pipe struct {
	c        *Cluster
	addr     string
	resp3    bool
	readonly bool
	timeout  time.Duration // how long a node may hold a command: hung past it

	out []byte
	// lent: out is a long command's own buffer (send), which Wrote must
	// not write over: a redirect sends the command again.
	lent bool
	sent fifo   // in out or written, waiting for their replies
	in   []byte // read, not yet a whole reply
	// scan knows how much of the reply in starts is whole: a big reply
	// is gone over once, not once per read it comes in.
	scan  reply.Scanner
	arena []byte // replies are cut from it, never overwritten
	// heard is when the node last sent bytes. A passthrough pipe's node
	// is hung once it sends nothing for the timeout while commands wait:
	// one client's pipeline of big values takes longer than that to come
	// through, and the commands behind it, sent with it, must not fail
	// for it. (A bucket call's deadline stays its own: a step is small.)
	heard time.Time
	// written counts the bytes ever written, which places each command
	// (forwarded.start, end); whole is how many of sent's first commands
	// are written to their last byte; progress is when the node last took
	// bytes. While a passthrough pipe's oldest command is not whole (a
	// value of many MB on its way), the node taking its bytes is alive:
	// its hang is counted from the last it took, and from the command's
	// last byte once it has all of it. A command written whole counts from
	// its first write, as before: bytes taken after it are the kernel's
	// buffers filling, not the node reading, which a hung node's socket
	// does for as long as commands trickle in.
	written  int64
	whole    int
	progress time.Time

	// A bucket pipe's calls: queued, and script calls in flight.
	bq        []queued
	bInFlight int
	// diverted: a script call was refused whole and its calls went to
	// the shard's queue; the pipe's later calls follow them (pump).
	diverted bool
	bucket   bool          // bucket steps only: Dial loads the script
	steps    []lua.Call    // a script call's steps while it is encoded
	outcomes []lua.Outcome // a script call's outcomes while they are settled
	// spare are the lists of answered script calls' steps, for the next
	// ones: at most maxFlushes are in flight, each of up to maxPipeline.
	spare [][]queued
}

// NewPipe makes the protocol half of a loop's connection to a node.
func (c *Cluster) NewPipe(addr string, resp3, readonly bool) *Pipe {
	return &Pipe{c: c, addr: addr, resp3: resp3, readonly: readonly, timeout: c.forwardTimeout()}
}

// NewBucketPipe makes the protocol half of a loop's connection to a node
// for bucket steps, whose commands the node must answer within the
// backend timeout.
func (c *Cluster) NewBucketPipe(addr string) *Pipe {
	p := c.NewPipe(addr, false, false)
	p.timeout, p.bucket = c.cfg.Timeout, true
	return p
}

// Addr is the node's address.
func (p *Pipe) Addr() string { return p.addr }

// Dial connects to the node, in the pipe's protocol, from any goroutine;
// the loop then owns the connection's socket. Connecting takes several
// round trips (the handshake, AUTH, SCRIPT LOAD), so it has its own bound,
// not a call's: the calls that wait for it are bounded by the loop (their
// deadline runs from when they were to be written), and the connection,
// once made, serves the calls after.
func (p *Pipe) Dial() (net.Conn, error) {
	conn, br, err := p.c.dial(p.addr, p.resp3, p.readonly, 512, dialTimeout)
	if err == nil && p.bucket {
		// A script call refused NOSCRIPT is decided again on the goroutine
		// path, while the calls sent after it are decided here: a key's
		// later steps would be taken before its earlier ones. A node
		// without the script (new, restarted) gets it before any call.
		conn.SetDeadline(time.Now().Add(dialTimeout))
		var r []byte
		if _, err = conn.Write(p.c.throttle.AppendLoad(nil)); err == nil {
			r, err = reply.Read(br, nil)
		}
		// A refusal (an ACL user allowed EVALSHA but not SCRIPT, say)
		// leaves the calls to load it on their NOSCRIPT.
		if err == nil && (len(r) == 0 || (r[0] != '$' && r[0] != '-')) {
			err = fmt.Errorf("router: SCRIPT LOAD to %s answered %q", p.addr, bytes.TrimRight(r[:min(len(r), 128)], "\r\n"))
		}
		if err != nil {
			conn.Close()
			return nil, err
		}
		conn.SetDeadline(time.Time{})
	}
	if err == nil && !p.bucket {
		if err = p.c.loadConn(conn, br, p.addr); err != nil {
			conn.Close()
			return nil, err
		}
	}
	if err == nil && br.Buffered() > 0 {
		conn.Close()
		return nil, errors.New("the node sent what nothing asked for")
	}
	return conn, err
}

func (p *Pipe) send(f *forwarded) {
	switch {
	case len(p.out) == 0 && !f.asking && len(f.cmd) >= lendOut:
		// Written from the command's buffer, not copied into the pipe's
		// (a copy of a 1 MB value, and the garbage of a buffer grown to
		// hold it). Its capacity ends at its length, so the append of
		// the next command copies what is left of it instead.
		p.out, p.lent = f.cmd[:len(f.cmd):len(f.cmd)], true
	default:
		if p.lent {
			// Copied out before anything is added (even nothing: an
			// append of no bytes would keep the command's buffer).
			p.out, p.lent = append([]byte(nil), p.out...), false
		}
		if f.asking {
			p.out = append(p.out, askingCmd...)
		}
		p.out = append(p.out, f.cmd...)
	}
	f.end = p.written + int64(len(p.out))
	f.start = f.end - int64(len(f.cmd)+btoi(f.asking)*len(askingCmd))
	f.expect, f.queued = f.replies+btoi(f.asking), false
	// A read sent again from a replica that timed out carries the time
	// it reached the replica: kept, it would make this node look hung
	// at once.
	f.sentAt = time.Time{}
	p.sent.push(f)
}

// Out is what is to be written to the node.
func (p *Pipe) Out() []byte { return p.out }

// Wrote drops the first n bytes of Out, which the node took at now.
func (p *Pipe) Wrote(n int, now time.Time) {
	prev := p.written
	p.written += int64(n)
	if n > 0 && !p.bucket {
		p.progress = now
		all := p.sent.all()
		for ; p.whole < len(all) && all[p.whole].end <= p.written; p.whole++ {
			if f := all[p.whole]; f.start < prev {
				f.sentAt = now // whole only now, after a write or more
			}
		}
	}
	if p.lent {
		p.out = p.out[n:]
		if len(p.out) == 0 {
			p.out, p.lent = nil, false
		}
		return
	}
	p.out = p.out[:copy(p.out, p.out[n:])]
	if len(p.out) == 0 && cap(p.out) > 64<<10 {
		p.out = nil
	}
}

// Waiting reports whether commands wait for replies.
func (p *Pipe) Waiting() bool { return p.sent.len() > 0 }

// Idle reports whether nothing is to be written, waits for a reply, or is
// queued on the pipe: the loop may close its connection and forget it.
func (p *Pipe) Idle() bool { return len(p.out) == 0 && p.sent.len() == 0 && len(p.bq) == 0 }

// Deadline is when the node is taken as hung if the oldest command
// written is not answered (for a passthrough pipe, nor anything more
// heard from the node, nor, while that command is still being written,
// more of it taken: see written); false when none waits.
func (p *Pipe) Deadline() (time.Time, bool) {
	if p.sent.len() == 0 || p.sent.all()[0].sentAt.IsZero() {
		return time.Time{}, false
	}
	from := p.sent.all()[0].sentAt
	if !p.bucket && p.whole == 0 && p.progress.After(from) {
		from = p.progress
	}
	if !p.bucket && p.heard.After(from) {
		from = p.heard
	}
	return from.Add(p.timeout), true
}

// Heard says the node sent bytes at now.
func (p *Pipe) Heard(now time.Time) { p.heard = now }

// Sent stamps the commands not stamped yet with when they were written.
func (p *Pipe) Sent(now time.Time) {
	sent := p.sent.all()
	for i := len(sent) - 1; i >= 0 && sent[i].sentAt.IsZero(); i-- {
		sent[i].sentAt = now
	}
}

// ReadBuf is where the next read from the node goes: at least n bytes,
// or all that the string a reply is in the middle of still needs.
func (p *Pipe) ReadBuf(n int) []byte {
	free := cap(p.in) - len(p.in)
	switch s := p.scan.Short(); {
	case s >= n && s <= len(p.in)+exactAhead:
		// The rest of a string whose length came: allocated once at its
		// size. Doubled toward it instead, a reply of a MB made its buffer
		// five times over. Past exactAhead more than has come, a node's
		// word is not taken: the buffer doubles, as it does for an array
		// of small elements.
		if free < s {
			p.in = slices.Grow(p.in, s)
		}
	case s > 0 && free >= s && len(p.in) >= exactAhead:
		// The end of a big string: room enough to make it whole.
	case free < n:
		// Doubled while a big array, or a string past exactAhead, arrives:
		// grown by n at a time (append's 1.25x), a reply of a MB allocated
		// five times its size.
		p.in = slices.Grow(p.in, max(n, len(p.in)))
	}
	return p.in[len(p.in):cap(p.in)]
}

// Feed takes the n bytes read into ReadBuf, and answers every command whose
// reply is now whole. An error (bytes that are no reply, or a reply nothing
// asked for) means the connection is lost: the loop closes it and calls
// Fail.
func (p *Pipe) Feed(n int) error {
	p.in = p.in[:len(p.in)+n]
	used := 0
	for used < len(p.in) {
		size := p.scan.Whole(p.in[used:])
		if size == 0 {
			break
		}
		if p.scan.Refused() {
			_, err := reply.Read(bufio.NewReader(bytes.NewReader(p.in[used:])), nil)
			return err
		}
		// The Scanner checked it as Read would: its bytes are the reply.
		r := p.in[used : used+size : used+size]
		if s := p.sent.all(); len(s) == 0 || s[0].bucket == nil {
			// A forwarded reply outlives the buffer (its client's
			// writer holds it). A bucket call's is read where it lies:
			// its decisions keep none of its bytes.
			r = p.keep(r)
		}
		used += size
		f, whole, err := matchReply(&p.sent, r)
		if err != nil {
			return err
		}
		if whole {
			// Taken off sent: answered, so written whole (or refused
			// before its end, when it was not: then none after it is).
			p.whole = max(p.whole-1, 0)
			f.answer(r)
		}
	}
	rest := copy(p.in, p.in[used:])
	p.in = p.in[:rest]
	switch {
	case rest == 0 && cap(p.in) > 64<<10:
		p.in = nil
	case cap(p.in) > 256<<10 && rest+p.scan.Short() < cap(p.in)/8:
		// A big reply's buffer, and the start of the next reply: kept
		// as it is, it would stay while the connection stays busy. (What
		// a string still to come needs is what ReadBuf sized it for.)
		p.in = append(make([]byte, 0, max(2*rest, 64<<10)), p.in...)
	}
	return nil
}

// The arena that replies are cut from: arenaSize at a time, a new one once
// less than minArenaLeft is left (a few replies' worth).
const (
	arenaSize    = 32 << 10
	minArenaLeft = 1 << 10
)

// exactAhead is how far past what a reply has brought so far its buffer
// may be sized at once by a string's length (ReadBuf).
const exactAhead = 1 << 20

// lendOut is the length from which a command is written from its own
// buffer when nothing else waits to be written (Pipe.send).
const lendOut = 64 << 10

// Fail answers every command waiting an error: the connection is lost
// (closed by the loop), and none of them will get its reply now. Its
// buffers go too: a loop keeps a pipe for every address it has named, and
// nodes that move (a restarted pod's new address) would leave theirs held.
func (p *Pipe) Fail(err error) {
	lost := p.sent.takeAll()
	p.whole = 0
	p.out, p.lent, p.in, p.scan = nil, false, nil, reply.Scanner{}
	fail(lost, p.addr, err)
	p.failQueued()
}

// keep copies r to the arena, where it stays as long as who answers with
// it keeps it.
func (p *Pipe) keep(r []byte) []byte {
	if cap(p.arena)-len(p.arena) < minArenaLeft {
		// A reply that does not fit in what is left is allocated on its
		// own; were the arena kept until it is exactly full, a few bytes
		// short of every reply, each reply after would be.
		p.arena = make([]byte, 0, arenaSize)
	}
	at := len(p.arena)
	if len(r) > cap(p.arena)-at {
		// Its size is known (it is all here): allocated once.
		return bytes.Clone(r)
	}
	p.arena = append(p.arena, r...)
	return p.arena[at:len(p.arena):len(p.arena)]
}

// matchReply gives reply r to the first command of sent, and takes that
// command off once r is its last reply (whole); a transaction's command
// answered MOVED, ASK or TRYAGAIN, for which the node discards the
// transaction, is kept for its answer.
func matchReply(sent *fifo, r []byte) (f *forwarded, whole bool, err error) {
	if sent.len() == 0 {
		return nil, false, errors.New("a reply nothing asked for")
	}
	f = sent.all()[0]
	if f.expect--; f.expect > 0 {
		if f.check && f.expect == 1 {
			f.ran = r // the command's own reply, before its check's
			return f, false, nil
		}
		// ASKING's +OK, or a transaction's +OK and +QUEUED.
		if moved, ask := isRedirectReply(r); (moved || ask || bytes.HasPrefix(r, []byte("-TRYAGAIN "))) && f.discarded == nil {
			f.discarded = r
		}
		if bytes.Equal(r, queuedReply) {
			f.queued = true
		}
		if isReadOnlyReply(r) && !f.readonly && f.c != nil {
			// A write queued on a replica where sluice's slot map has a
			// primary (EXEC answers EXECABORT): the map is behind.
			f.c.stale.Store(true)
		}
		return f, false, nil
	}
	sent.pop()
	return f, true, nil
}
