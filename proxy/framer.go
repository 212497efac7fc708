package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"
)

// Limits on what one client may send: Redis's, since sluice forwards
// ordinary commands to Redis. Every connection is read through a framer
// that enforces them as the bytes arrive, so that nothing a header
// announces is allocated: what a client costs is what it has sent.
const (
	// proto-max-bulk-len: the longest argument.
	defaultMaxBulkLen = 512 << 20
	// Redis 7 refuses a multibulk length over INT_MAX.
	defaultMaxArgs = math.MaxInt32
	// And, from a client that has yet to authenticate, more arguments
	// than these or a longer one (processMultibulkBuffer): until it is
	// somebody, what it sends is bounded by kilobytes.
	unauthMaxArgs = 10
	unauthMaxBulk = 16384
	// client-query-buffer-limit. Redis holds a command's arguments apart
	// from its query buffer once they are parsed; sluice keeps a command's
	// bytes until it is whole, so the limit bounds the whole command.
	defaultQueryBufferLimit = 1 << 30
	// PROTO_INLINE_MAX_SIZE: an inline (telnet) command line.
	maxInline = 64 << 10
	// Digits and CR after the "*" or "$": no header Redis accepts is
	// longer, and only this much of one is kept.
	maxHeaderLine = 32
)

// Framing errors, in Redis's words. Redis closes a client over its query
// buffer limit without a reply, and logs it; sluice tells the client too,
// in the words of that log line, since the client's command is lost.
var (
	errQueryBuffer      = errors.New("reached max query buffer length")
	errInline           = errors.New("too big inline request")
	errBulkLength       = errors.New("invalid bulk length")
	errMultibulkLength  = errors.New("invalid multibulk length")
	errUnbalancedQuotes = errors.New("unbalanced quotes in request")
	errTooBigCount      = errors.New("too big mbulk count string")
	errTooBigBulkCount  = errors.New("too big bulk count string")
	errUnauthMultibulk  = errors.New("unauthenticated multibulk length")
	errUnauthBulk       = errors.New("unauthenticated bulk length")
)

type frameState uint8

const (
	atCommand  frameState = iota // the first byte of a command
	inInline                     // an inline command, until '\n'
	inCount                      // "*<count>\r\n"
	atBulk                       // the '$' of the next argument
	inBulkLen                    // "$<len>\r\n"
	inBulkBody                   // the argument's bytes and its CRLF
)

// framer follows the RESP framing of a client's byte stream to enforce
// the limits and check what the parsers after it take for granted.
type framer struct {
	maxBulk, maxArgs, maxQuery int64
	// unauth: the client has yet to authenticate (Redis's smaller
	// bounds), as of the command being read; set before each next.
	unauth bool

	state frameState
	line  [maxHeaderLine]byte // the header line's first bytes
	nline int                 // its length so far
	nargs int64               // arguments left in the command
	left  int64               // bytes left of a bulk (with its CRLF) or an inline line
	size  int64               // bytes of the current command so far
}

// next consumes p up to the end of the first command that ends in it, and
// says whether one did; otherwise it is scan. A multibulk count of zero or
// less is a whole command with no arguments, which Redis ignores.
func (f *framer) next(p []byte) (n int, complete bool, err error) {
	n, complete, _, err = f.nextArgs(p, nil)
	return n, complete, err
}

// nextArgs is next, but a command found whole at once (whole) comes with
// its arguments in *argv (empty before), when argv is not nil, and
// reported split: they need no splitArgs.
func (f *framer) nextArgs(p []byte, argv *[][]byte) (n int, complete, split bool, err error) {
	if f.state == atCommand && len(p) > 0 && p[0] == '*' {
		if n := f.whole(p, argv); n > 0 {
			return n, true, argv != nil, nil
		}
		if argv != nil {
			// What whole split of a command it then left: nothing may
			// keep the client's input from its collection.
			clear(*argv)
			*argv = (*argv)[:0]
		}
	}
	n, complete, err = f.walk(p)
	return n, complete, false, err
}

// walk is next byte by byte: for what whole leaves, a command cut by the
// end of p, and every error.
func (f *framer) walk(p []byte) (n int, complete bool, err error) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if f.state == atCommand {
			f.size = 0
		}
		if f.size++; f.size > f.maxQuery {
			return i, false, errQueryBuffer
		}
		switch f.state {
		case atCommand:
			if c == '*' {
				f.state, f.nline = inCount, 0
			} else {
				f.state, f.left = inInline, maxInline
				i-- // the byte is part of the line
			}
		case inInline:
			if c == '\n' {
				f.state = atCommand
				return i + 1, true, nil
			} else if f.left--; f.left < 0 {
				return i, false, errInline
			}
		case inCount, inBulkLen:
			if c != '\n' {
				switch {
				case f.nline < maxHeaderLine:
					f.line[f.nline] = c
				case bytes.IndexByte(f.line[:], '\r') >= 0:
					// Redis ends a header at its first CR and the byte
					// after it: here, one longer than any number.
					return i, false, f.headerErr()
				case c == '\r':
					f.line[maxHeaderLine-1] = c // the next byte ends it
				case f.nline+2 > maxInline:
					// Without a CR, Redis waits for one until the header
					// (its '*' or '$', the line and c) is past
					// PROTO_INLINE_MAX_SIZE.
					return i, false, f.tooBigErr()
				}
				f.nline++
				continue
			}
			n, ok := int64(-1), f.nline > 0 && f.nline <= maxHeaderLine && f.line[f.nline-1] == '\r'
			if ok {
				n, ok = parseRedisInt(f.line[:f.nline-1]) // a header is read as Redis reads it
			}
			if f.state == inCount {
				if !ok || n > f.maxArgs {
					return i, false, f.headerErr()
				}
				if f.unauth && n > unauthMaxArgs {
					return i, false, errUnauthMultibulk
				}
				if n <= 0 {
					f.state = atCommand
					return i + 1, true, nil
				}
				f.state, f.nargs = atBulk, n
			} else {
				// n+2, the body with its CRLF, must not wrap, nor redcon's
				// sum of n and the body's offset in its buffer: any
				// --proto-max-bulk-len up to Redis's LONG_MAX is taken, and
				// no buffer in memory comes near MaxInt64/2 bytes.
				if !ok || n < 0 || n > f.maxBulk || n > math.MaxInt64/2 {
					return i, false, f.headerErr()
				}
				if f.unauth && n > unauthMaxBulk {
					return i, false, errUnauthBulk
				}
				f.state, f.left = inBulkBody, n+2
			}
		case atBulk:
			if c != '$' {
				// The byte itself, as Redis's %c writes it: not the UTF-8
				// of the rune it would be.
				return i, false, errors.New("expected '$', got '" + string([]byte{c}) + "'")
			}
			f.state, f.nline = inBulkLen, 0
		case inBulkBody:
			if f.left > 2 {
				// Skip the body at once.
				skip := min(f.left-2, int64(len(p)-i))
				if f.size += skip - 1; f.size > f.maxQuery {
					return i, false, errQueryBuffer
				}
				i += int(skip) - 1
				f.left -= skip
				continue
			}
			if c != "\r\n"[2-f.left] {
				return i, false, errBulkLength
			}
			if f.left--; f.left == 0 {
				f.state = atBulk
				if f.nargs--; f.nargs == 0 {
					f.state = atCommand
					return i + 1, true, nil
				}
			}
		}
	}
	return len(p), false, nil
}

// whole is the length of the multibulk command p begins with when all of
// it is in p and walk would take it without an error, else 0 (walk then
// frames it); the arguments are appended to *argv on the way, when argv
// is not nil. Clients send commands whole, pipelined or not, and finding
// each line's end with IndexByte, splitting as it goes, costs a fraction
// of walking every header byte and splitting again: 4.4 against 6.2 µs a
// pipeline of 16 THROTTLE (BenchmarkLoopThrottle16). Anything walk would
// refuse, or read with Redis's quirks (a CR within a header, a count of 0
// or less, a limit reached), is left to it, which says why
// (FuzzFramerWhole holds the two to the same verdicts).
func (f *framer) whole(p []byte, argv *[][]byte) int {
	nargs, pos, ok := f.header(p, 0)
	if !ok || nargs <= 0 || nargs > f.maxArgs || f.unauth && nargs > unauthMaxArgs {
		return 0
	}
	for range nargs {
		if pos >= len(p) || p[pos] != '$' {
			return 0
		}
		var size int64
		if size, pos, ok = f.header(p, pos); !ok || size < 0 || size > f.maxBulk || f.unauth && size > unauthMaxBulk ||
			size > int64(len(p)-pos-2) || p[pos+int(size)] != '\r' || p[pos+int(size)+1] != '\n' {
			return 0
		}
		end := pos + int(size)
		if argv != nil {
			*argv = append(*argv, p[pos:end:end])
		}
		if pos = end + 2; int64(pos) > f.maxQuery {
			return 0
		}
	}
	return pos
}

// header reads the number of the header line at p[at] ('*' or '$'),
// whole within maxHeaderLine bytes and ended by CRLF, as walk reads it,
// and returns it with where the line after it begins.
func (f *framer) header(p []byte, at int) (n int64, next int, ok bool) {
	line := p[at+1 : min(len(p), at+2+maxHeaderLine)]
	nl := bytes.IndexByte(line, '\n')
	if nl < 1 || line[nl-1] != '\r' {
		return 0, 0, false
	}
	n, ok = parseRedisInt(line[:nl-1])
	return n, at + 2 + nl, ok
}

func (f *framer) headerErr() error {
	if f.state == inCount {
		return errMultibulkLength
	}
	return errBulkLength
}

func (f *framer) tooBigErr() error {
	if f.state == inCount {
		return errTooBigCount
	}
	return errTooBigBulkCount
}

// splitArgs appends the arguments of raw, one whole multibulk command that
// a framer passed, to argv, without copying them.
func splitArgs(argv [][]byte, raw []byte) [][]byte {
	eol := bytes.IndexByte(raw, '\n')
	n, _ := parseInt(raw[1 : eol-1])
	pos := eol + 1
	for range n {
		eol = pos + bytes.IndexByte(raw[pos:], '\n')
		size, _ := parseInt(raw[pos+1 : eol-1])
		start := eol + 1
		end := start + int(size)
		argv = append(argv, raw[start:end:end])
		pos = end + 2
	}
	return argv
}

// splitInline appends the arguments of raw, one whole inline command that
// a framer passed, to argv, as Redis's sdssplitargs reads them: separated
// by blanks, each bare or quoted ("..." with \xHH, \n, \r, \t, \b, \a
// and \<any> escapes; '...' with \' only), where a quote may begin inside
// a bare argument and a closing quote must end one. Like Redis it reads
// the line as a C string, up to a NUL byte. It takes time linear in the
// line, where redcon's parser allocates the square of it, and reports
// false for unbalanced quotes. Arguments without quotes are not copied.
func splitInline(argv [][]byte, raw []byte) ([][]byte, bool) {
	line := raw[:len(raw)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	// at is the byte at i, or the C string's terminating NUL past its end.
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	for i := 0; ; {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return argv, true
		}
		start, end := i, -1 // line[start:end] while no quote was met
		var arg []byte      // the argument, once a quote made it a copy
		inq, insq := false, false
		for done := false; !done; i++ {
			c := at(i)
			switch {
			case inq:
				switch {
				case c == '\\' && at(i+1) == 'x' && isHex(at(i+2)) && isHex(at(i+3)):
					arg = append(arg, unhex(at(i+2))<<4|unhex(at(i+3)))
					i += 3
				case c == '\\' && at(i+1) != 0:
					i++
					arg = append(arg, unescape(line[i]))
				case c == '"':
					if n := at(i + 1); n != 0 && !isSpace(n) {
						return argv, false
					}
					done = true
				case c == 0:
					return argv, false
				default:
					arg = append(arg, c)
				}
			case insq:
				switch {
				case c == '\\' && at(i+1) == '\'':
					i++
					arg = append(arg, '\'')
				case c == '\'':
					if n := at(i + 1); n != 0 && !isSpace(n) {
						return argv, false
					}
					done = true
				case c == 0:
					return argv, false
				default:
					arg = append(arg, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done, end = true, i
				case '"', '\'':
					if arg == nil {
						arg = append([]byte{}, line[start:i]...)
					}
					inq, insq = c == '"', c == '\''
				default:
					if arg != nil {
						arg = append(arg, c)
					}
				}
			}
		}
		if arg == nil {
			arg = line[start:end:end]
		}
		i = min(i, len(line))
		argv = append(argv, arg)
	}
}

// isSpace is C's isspace.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// unescape is the byte a backslash before c stands for in "...".
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

// blank reports an inline line with nothing in it, which Redis ignores.
func blank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

// lingerTime bounds how long a client closed after QUIT or a protocol
// error has its input read and discarded: closing a socket with input
// unread sends a TCP reset, which can drop the replies before it. The
// write side is shut first, so the client sees its replies and then EOF.
const lingerTime = time.Second

// framedReadSize is the most a framedConn reads from its socket at once.
const framedReadSize = 16 << 10

// framedConn is a client connection read through a framer, for redcon. It
// hands redcon only well-formed multibulk commands: an inline command
// rewritten as one (split here, in linear time), and no empty command (a
// blank line, an empty multibulk), which redcon refuses: where those came
// is kept instead (empties), as Redis spends a CLIENT REPLY SKIP on them.
// It holds back only what it may
// rewrite or drop, an inline line or a count; the rest goes on as it
// arrives. redcon grows its buffer as bytes arrive, never for what a
// header announces (doubling it, so it holds up to twice what arrived, and
// keeping the largest until it next grows it, idle or not), but parses a
// partial command again from its start on every read: so while a command
// is unfinished a Read fills redcon's buffer before it returns, and a long
// command is parsed a logarithmic number of times as that buffer doubles;
// each parse counts to the arguments the command announced, so one that
// announces far more than it sent is held back here (holding).
//
// On a framing error it hands redcon the well-framed bytes before it; at
// the next read, once redcon has answered those, it answers the client
// "-ERR Protocol error: ..." itself and fails the read, which closes the
// connection.
type framedConn struct {
	net.Conn
	f       framer
	buf     []byte   // what the socket gave
	held    []byte   // an inline command or a multibulk count not yet whole
	argv    [][]byte // an inline command's arguments
	out     []byte   // framed bytes for redcon; out[off:] are not yet handed on
	off     int      //
	lastEnd int      // where in out the last whole command ends, or 0
	// holding: the multibulk command that starts at holdAt in out is not
	// handed on yet, as it announced many more arguments than it has
	// bytes. redcon parses an unfinished command again at each read,
	// counting to its announced arguments each time: it gets the command
	// once that count costs no more than parsing the bytes that came.
	holding bool
	holdAt  int
	ferr    error // the framing error to report once out is handed on
	rerr    error // the socket's error, likewise
	// rest is what the socket gave past a whole command, not yet framed:
	// while the client has yet to authenticate, a command is framed only
	// once the one before it ran (it may be AUTH, which lifts the bounds).
	rest []byte
	cl   *client // the client served, once redcon accepted it
	// left stops counting the client as connected when it lingers.
	left func()
	// atEOF runs once, as the client's EOF is handed to redcon, which
	// closes the client then (Server.fenceAtEOF); also before a protocol
	// error is written, which closes it too.
	atEOF func()
	// handed counts the commands handed to redcon, taken those the server
	// took; empties[emptyAt:] are the counts of commands handed before
	// each empty command (one for any number in a row), not yet taken.
	handed, taken int64
	empties       []int64
	emptyAt       int
	// idle closes the client once it sent nothing for that long (the
	// server's IdleTimeout); redcon reads only between commands, so a
	// client waiting for a reply is never idle.
	idle time.Duration
	// limit bounds what a write leaves pending (the soft limit: the hard
	// one is the server's, per pipeline); softOver is since when it was
	// over the soft limit.
	limit    OutputLimit
	softOver time.Time
	// shaken: a TLS client's handshake is done (and bounded in time).
	shaken bool
	// While the server drains, the client's commands read before are
	// answered, and no more are read: draining says when. busy is the
	// count of busy clients Shutdown waits for, in which c counts
	// (counted) from a read of its socket that brought bytes until they
	// are all handed to redcon and its pipeline begins (serveRESP counts
	// itself then), and again between two pipelines while it holds some:
	// otherwise Shutdown could close it in between, its commands read
	// and unanswered.
	draining func() bool
	busy     *atomic.Int64
	counted  atomic.Bool
	// conns holds c while it is open, for Shutdown to wake its read.
	conns *connSet
	// errors are the server's error replies, a protocol error's counted
	// as it is written, as Redis counts it: not once the connection
	// closes, up to lingerTime later.
	errors *errorStats
}

// connSet is the goroutine path's open client connections. Shutdown wakes
// their reads: an idle client would otherwise stay open while other
// clients' replies hold the drain, and what it sent meanwhile would be
// served. Kept per connection, not per read, so that a read takes no lock.
type connSet struct {
	mu sync.Mutex
	m  map[*framedConn]struct{}
}

func (s *connSet) add(c *framedConn) {
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[*framedConn]struct{})
	}
	s.m[c] = struct{}{}
	s.mu.Unlock()
}

func (s *connSet) remove(c *framedConn) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

// wake ends the reads under way and has those to come not wait; a read
// that sets its own deadline after this sees the drain first (Read).
func (s *connSet) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.m {
		c.Conn.SetReadDeadline(time.Unix(1, 0))
	}
}

// Close forgets c for Shutdown, then closes it.
func (c *framedConn) Close() error {
	if c.conns != nil {
		c.conns.remove(c)
	}
	return c.Conn.Close()
}

// cut closes c at once: a TLS connection without its close_notify alert,
// whose write, with no other write under way, waits up to 5 s for a
// client that reads nothing, on the goroutine that cuts it (a node
// connection's reader, which other clients' replies wait on).
func (c *framedConn) cut() error {
	if tc, ok := c.Conn.(*tls.Conn); ok {
		if c.conns != nil {
			c.conns.remove(c)
		}
		return tc.NetConn().Close()
	}
	return c.Close()
}

// buffered reports whether c holds bytes of the client not yet handed to
// redcon, beyond a command still unfinished.
func (c *framedConn) buffered() bool {
	ready := len(c.out)
	if c.holding {
		ready = c.holdAt
	}
	return c.off < ready || len(c.rest) > 0
}

// count counts c as busy, once.
func (c *framedConn) count() {
	if c.busy != nil && c.counted.CompareAndSwap(false, true) {
		c.busy.Add(1)
	}
}

// uncount stops counting c as busy.
func (c *framedConn) uncount() {
	if c.busy != nil && c.counted.CompareAndSwap(true, false) {
		c.busy.Add(-1)
	}
}

// handshakeTimeout bounds a TLS client's handshake (a variable for tests): a client that
// connects and sends nothing would otherwise hold its goroutine, and its
// place under --maxclients, for good.
var handshakeTimeout = 10 * time.Second

func (c *framedConn) Read(p []byte) (int, error) {
	if !c.shaken {
		c.shaken = true
		if tc, ok := c.Conn.(*tls.Conn); ok {
			// A client that says nothing is idle: --timeout, when it is
			// shorter, bounds the handshake too, as it bounds a silent
			// client on a loop.
			d := handshakeTimeout
			if c.idle > 0 {
				d = min(d, c.idle)
			}
			tc.SetDeadline(time.Now().Add(d))
			if err := tc.Handshake(); err != nil {
				return 0, fmt.Errorf("%w: %w", errHandshake, err)
			}
			tc.SetDeadline(time.Time{})
		}
	}
	n, whole := 0, false
	for n < len(p) {
		ready := len(c.out)
		if c.holding {
			ready = c.holdAt
		}
		if c.off < ready {
			k := copy(p[n:], c.out[c.off:ready])
			whole = whole || (c.lastEnd > c.off && c.lastEnd <= c.off+k)
			c.off += k
			n += k
			continue
		}
		if (n > 0 && whole) || c.ferr != nil || (c.rerr != nil && len(c.rest) == 0) {
			break
		}
		switch {
		case !c.holding:
			c.out, c.off = c.out[:0], 0
			if cap(c.out) > 4*framedReadSize {
				c.out = nil // an inline command's rewrite: do not keep it
			}
		case c.holdAt > 0:
			c.out = c.out[:copy(c.out, c.out[c.holdAt:])]
			c.off, c.holdAt = 0, 0
		}
		c.lastEnd = 0
		if len(c.rest) > 0 {
			d := c.rest
			c.rest = nil
			c.ferr = c.frame(d)
			continue
		}
		if c.draining != nil && c.draining() {
			// What it sent before the drain is all handed on: nothing
			// more is read, and it closes once answered.
			if n > 0 {
				break
			}
			c.uncount()
			c.linger()
			return 0, io.EOF
		}
		// All it held is handed on (an unfinished command at most): not
		// busy while the read waits.
		c.uncount()
		if c.buf == nil {
			c.buf = make([]byte, framedReadSize)
		}
		if c.idle > 0 {
			c.Conn.SetReadDeadline(time.Now().Add(c.idle))
		}
		if c.draining != nil && c.draining() {
			// Shutdown's wake may have come before the deadline above
			// replaced its own: closed above.
			continue
		}
		m, err := c.Conn.Read(c.buf)
		if errors.Is(err, os.ErrDeadlineExceeded) && c.draining != nil && c.draining() {
			// Woken by Shutdown: what came is answered, and the client
			// closed as any other once it is.
			err = nil
		}
		if m > 0 {
			c.count()
		}
		c.rerr = err
		c.ferr = c.frame(c.buf[:m])
	}
	if n > 0 {
		return n, nil
	}
	if (c.ferr != nil || c.rerr == io.EOF) && c.atEOF != nil {
		f := c.atEOF
		c.atEOF = nil
		f()
	}
	if c.ferr != nil {
		return 0, c.fail()
	}
	return 0, c.rerr
}

// writeChunk is the most framedConn.Write hands the socket at once: each
// chunk taken is progress, which restarts the idle timeout.
const writeChunk = 64 << 10

// Write writes redcon's replies. A client that does not read them is
// closed as Redis closes it: once the socket took nothing for the idle
// timeout (a write is an interaction), or once what is left of the write
// stayed over the soft output limit for its seconds. Without either it
// just blocks: the client's own goroutine waits, no other.
func (c *framedConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		// redcon's flush after a pipeline serveRESP wrote itself: no
		// system call for nothing.
		return 0, nil
	}
	unauth := 0
	if c.cl != nil {
		defer c.cl.view.wrote()
		if c.cl.user == nil {
			unauth = min(len(p), c.cl.unauthMade)
		}
	}
	return c.writeBounded(p, c.idle, unauth)
}

// unauthWriteWait is how long a write to a client yet to authenticate
// may wait: its socket full of replies it does not read, Redis, which
// would go on reading it, would soon hold more than unauthOutputLimit
// for it and close it. A goroutine reads the client only between writes,
// so what its blocked write holds never grows to that bound.
const unauthWriteWait = 10 * time.Millisecond

// writeBounded is Write's bounds with the idle timeout given: the writer
// of a client with a tunnel (pushOut) writes on a goroutine of its own,
// which may not read c.idle, the client goroutine's. unauth: how many
// bytes at the end of p were made while the client was yet to
// authenticate (client.unauthMade); what it asked before a RESET is not
// bounded so.
func (c *framedConn) writeBounded(p []byte, idle time.Duration, unauth int) (int, error) {
	if idle <= 0 && c.limit.Soft <= 0 && unauth == 0 {
		return c.Conn.Write(p)
	}
	defer c.Conn.SetWriteDeadline(time.Time{})
	n := 0
	for n < len(p) {
		now := time.Now()
		var deadline time.Time
		if idle > 0 {
			deadline = now.Add(idle)
		}
		if d := now.Add(unauthWriteWait); n+writeChunk > len(p)-unauth && unauth > 0 && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
		if soft := c.limit.Soft; soft > 0 && int64(len(p)-n) > soft {
			if c.softOver.IsZero() {
				c.softOver = now
			}
			if d := c.softOver.Add(c.limit.SoftFor); deadline.IsZero() || d.Before(deadline) {
				deadline = d
			}
		} else {
			c.softOver = time.Time{}
		}
		c.Conn.SetWriteDeadline(deadline)
		k, err := c.Conn.Write(p[n:min(len(p), n+writeChunk)])
		n += k
		if err != nil {
			return n, err
		}
	}
	c.softOver = time.Time{}
	return n, nil
}

// frame moves d to out as the framer passes it, up to a framing error.
func (c *framedConn) frame(d []byte) error {
	for len(d) > 0 {
		var k int
		var whole bool
		var err error
		c.f.unauth = c.cl != nil && c.cl.user == nil
		switch c.f.state {
		case atCommand, inInline, inCount:
			end := len(d)
			if i := bytes.IndexByte(d, '\n'); i >= 0 {
				end = i + 1
			}
			k, whole, err = c.f.next(d[:end])
			c.held = append(c.held, d[:k]...)
			if err == nil && (whole || c.f.state == atBulk) {
				err = c.release(whole)
			}
		default:
			k, whole, err = c.f.next(d)
			c.out = append(c.out, d[:k]...)
			if whole {
				c.lastEnd = len(c.out)
				c.handed++
			}
			if c.holding && (whole || c.f.nargs <= c.f.size) {
				c.holding = false
			}
		}
		d = d[k:]
		if err != nil {
			return err
		}
		if whole && (c.f.unauth || c.resets()) && len(d) > 0 {
			// What follows is framed once the command is run: an AUTH
			// lifts the bounds of a client yet to authenticate, a RESET
			// may bring them back.
			c.rest = d // in c.buf, which is not read into before it is framed
			return nil
		}
	}
	return nil
}

// resetFramed is how a RESET, multibulk or inline, is handed to redcon.
var resetFramed = []byte("*1\r\n$5\r\nRESET\r\n")

// resets reports whether the command last handed on may be a RESET: one
// whose last bytes read as one, of RESET's length when its first bytes
// were handed on in a read before (the framer walked it then, and counted
// it). Another that ends so only has what follows it framed a read later.
func (c *framedConn) resets() bool {
	tail := c.out[max(0, c.lastEnd-len(resetFramed)):c.lastEnd]
	return (len(tail) == len(resetFramed) || c.f.size == int64(len(resetFramed))) &&
		bytes.EqualFold(tail, resetFramed[len(resetFramed)-len(tail):])
}

// release hands on what was held back: a multibulk count as it came, or a
// whole inline command as a multibulk one; an empty multibulk not at all.
func (c *framedConn) release(whole bool) error {
	held := c.held
	c.held = c.held[:0]
	if cap(c.held) > 1<<10 {
		c.held = nil // a long inline line's: do not keep it
	}
	switch {
	case !whole:
		if c.f.nargs > max(c.f.size, framedReadSize) {
			c.holding, c.holdAt = true, len(c.out)
		}
		c.out = append(c.out, held...)
		return nil
	case held[0] == '*' || blank(held):
		c.empty()
		return nil
	}
	var ok bool
	if c.argv, ok = splitInline(c.argv[:0], held); !ok {
		return errUnbalancedQuotes
	}
	if len(c.argv) == 0 {
		c.empty() // a line that starts with a NUL
		return nil
	}
	c.out = redcon.AppendArray(c.out, len(c.argv))
	for _, a := range c.argv {
		c.out = redcon.AppendBulk(c.out, a)
	}
	clear(c.argv)
	c.lastEnd = len(c.out)
	c.handed++
	return nil
}

// empty notes an empty command, not handed on, after the commands handed
// on so far.
func (c *framedConn) empty() {
	if n := len(c.empties); n > c.emptyAt && c.empties[n-1] == c.handed {
		return // one after another: the first spends what they spend
	}
	c.empties = append(c.empties, c.handed)
}

// emptyBefore reports whether an empty command came after the commands
// the server took, before the next one handed on or a framing error: it is
// taken now (emptyCommand). A client's commands are taken, and its
// framing errors reported, on the goroutine that reads it: no lock.
func (c *framedConn) emptyBefore() bool {
	if c.emptyAt == len(c.empties) || c.empties[c.emptyAt] != c.taken {
		return false
	}
	if c.emptyAt++; c.emptyAt == len(c.empties) {
		c.empties, c.emptyAt = c.empties[:0], 0
		if cap(c.empties) > 64 {
			c.empties = nil // a long pipeline's: do not keep it
		}
	}
	return true
}

func (c *framedConn) fail() error {
	// redcon's writes happen between its reads, on this goroutine, so this
	// reply cannot interleave with one of them. It is written if the
	// socket takes it in time: a client that reads nothing must not hold
	// this goroutine, and its connection, for good.
	if c.cl != nil && c.emptyBefore() {
		c.cl.emptyCommand()
	}
	if c.errors != nil {
		c.errors.add(protocolErrorCode)
	}
	if c.cl == nil || !c.cl.silenced() {
		c.Conn.SetWriteDeadline(time.Now().Add(lingerTime))
		c.Conn.Write(appendProtocolError(nil, c.ferr.Error()))
	}
	if c.cl != nil && c.cl.tunnel != nil {
		// As Redis frees the client once the error is written, its
		// subscriptions end now, not when it closes its side.
		c.cl.tunnel.Close()
	}
	c.linger()
	return fmt.Errorf("%w: %w", errProtocolClosed, c.ferr)
}

// linger shuts the write side, after the replies, and discards the
// client's input until it closes, for at most lingerTime; a Close from
// another goroutine ends it at once.
func (c *framedConn) linger() {
	if c.left != nil {
		c.left()
	}
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
	if c.buf == nil {
		c.buf = make([]byte, framedReadSize)
	}
	for {
		if _, err := c.Conn.Read(c.buf); err != nil {
			return
		}
	}
}

// appendProtocolError is the one reply to bytes that are not RESP; the
// connection closes after it, as Redis closes it.
func appendProtocolError(b []byte, msg string) []byte {
	return redcon.AppendError(b, protocolErrorCode+" Protocol error: "+msg)
}

// protocolErrorCode is the code of appendProtocolError's replies, which
// is how errorStats counts them.
const protocolErrorCode = "ERR"

var errProtocolClosed = errors.New("proxy: protocol error")

var errHandshake = errors.New("TLS handshake")

// logQueryBuffer reports a client closed for its query buffer, as Redis
// logs it: the limit is the operator's to raise.
func logQueryBuffer(log *zap.Logger, addr string, limit int64) {
	log.Warn("closing client that reached max query buffer length",
		zap.String("addr", addr), zap.Int64("client_query_buffer_limit", limit))
}

// framedListener wraps every accepted connection in a framer, and turns
// away those past the server's --maxclients.
type framedListener struct {
	net.Listener
	f framer // a new connection's
	s *Server

	backoff time.Duration // before accepting again, after accept failed
}

// acceptFailed waits before the next accept after one failed with err
// (out of descriptors, say), longer each time from 5 ms to 1 s, and is
// the wait: the clients already served go on meanwhile.
func (s *Server) acceptFailed(backoff time.Duration, err error) time.Duration {
	backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
	s.log.Warn("accepting a client", zap.Error(err), zap.Duration("retry_in", backoff))
	time.Sleep(backoff)
	return backoff
}

func (l *framedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if l.s.isDraining() {
				// redcon closes every client once its listener fails: not
				// before Shutdown has answered them.
				<-l.s.ctx.Done()
			}
			if l.s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			// redcon would retry at once, on a listener still readable,
			// spinning a core.
			l.backoff = l.s.acceptFailed(l.backoff, err)
			continue
		}
		l.backoff = 0
		if l.s.admit() {
			fc := &framedConn{Conn: c, f: l.f, idle: l.s.cfg.IdleTimeout, limit: l.s.cfg.OutputLimit, draining: l.s.isDraining, busy: &l.s.busy, conns: &l.s.conns, errors: &l.s.stats.errors}
			l.s.conns.add(fc)
			return fc, nil
		}
		if _, ok := c.(*tls.Conn); !ok {
			l.s.reject(c, 100*time.Millisecond)
			continue
		}
		// Its refusal needs a handshake first: not on the accepting
		// goroutine, which a client that never answers would hold. At
		// most maxRefusing at once, each for a second at most: a flood of
		// connections past the limit is closed unanswered.
		select {
		case l.s.refusing <- struct{}{}:
			go func() {
				l.s.reject(c, time.Second)
				<-l.s.refusing
			}()
		default:
			l.s.stats.rejected.Add(1)
			c.Close()
		}
	}
}
