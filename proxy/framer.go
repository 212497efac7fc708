package proxy

import (
	"bytes"
	"errors"
	"net"

	"github.com/tidwall/redcon"
)

// Limits on what one client may send. redcon grows its buffer for whatever
// a header announces (and indexes past it for lengths near 2^63), its
// inline parser costs the square of the line, and it re-parses a partial
// command on every read, so every connection is read through a framer that
// enforces these before redcon sees the bytes. They fit sluice's commands,
// which are small; passthrough of arbitrary commands will need them raised
// (Config.MaxBulkLen and friends).
const (
	defaultMaxBulkLen = 1 << 20 // one argument
	defaultMaxArgs    = 1024    // arguments in one command
	defaultMaxCommand = 4 << 20 // bytes of one command, headers included
	defaultMaxInline  = 1 << 10 // an inline (telnet) command line
	maxHeaderLine     = 32      // "*" or "$" plus digits and CRLF
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

// framer follows the RESP framing of a client's byte stream just enough to
// enforce the limits; redcon still does the parsing.
type framer struct {
	maxBulk, maxArgs, maxInline, maxCommand int64

	state frameState
	line  [maxHeaderLine]byte // header line so far
	nline int
	nargs int64 // arguments left in the command
	left  int64 // bytes left of a bulk (with its CRLF) or an inline line
	size  int64 // bytes of the current command so far
}

// scan consumes p and returns how many bytes are well framed; when that is
// less than len(p), err says what is wrong with the byte that follows.
func (f *framer) scan(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, _, err := f.next(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// next consumes p up to the end of the first command that ends in it, and
// says whether one did; otherwise it is scan.
func (f *framer) next(p []byte) (n int, complete bool, err error) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if f.state == atCommand {
			f.size = 0
		}
		if f.size++; f.size > f.maxCommand {
			return i, false, errors.New("too big request")
		}
		switch f.state {
		case atCommand:
			if c == '*' {
				f.state, f.nline = inCount, 0
			} else {
				f.state, f.left = inInline, f.maxInline
				i-- // the byte is part of the line
			}
		case inInline:
			if c == '\n' {
				f.state = atCommand
				return i + 1, true, nil
			} else if f.left--; f.left < 0 {
				return i, false, errors.New("too big inline request")
			}
		case inCount, inBulkLen:
			if c != '\n' {
				if f.nline == maxHeaderLine {
					return i, false, f.headerErr()
				}
				f.line[f.nline] = c
				f.nline++
				continue
			}
			n, ok := int64(-1), f.nline > 0 && f.line[f.nline-1] == '\r'
			if ok {
				n, ok = parseInt(f.line[:f.nline-1])
			}
			if f.state == inCount {
				if !ok || n <= 0 || n > f.maxArgs {
					return i, false, f.headerErr()
				}
				f.state, f.nargs = atBulk, n
			} else {
				if !ok || n < 0 || n > f.maxBulk {
					return i, false, f.headerErr()
				}
				f.state, f.left = inBulkBody, n+2
			}
		case atBulk:
			if c != '$' {
				return i, false, errors.New("expected '$', got '" + string(c) + "'")
			}
			f.state, f.nline = inBulkLen, 0
		case inBulkBody:
			// Skip the body at once; its CRLF is checked by redcon.
			skip := min(f.left, int64(len(p)-i))
			if f.size += skip - 1; f.size > f.maxCommand {
				return i, false, errors.New("too big request")
			}
			i += int(skip) - 1
			if f.left -= skip; f.left == 0 {
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

// splitArgs appends the arguments of raw, one whole multibulk command that
// a framer passed, to argv, without copying them. It reports false when an
// argument does not end in CRLF, the one thing the framer leaves unchecked.
func splitArgs(argv [][]byte, raw []byte) ([][]byte, bool) {
	eol := bytes.IndexByte(raw, '\n')
	n, _ := parseInt(raw[1 : eol-1])
	pos := eol + 1
	for range n {
		eol = pos + bytes.IndexByte(raw[pos:], '\n')
		size, _ := parseInt(raw[pos+1 : eol-1])
		start := eol + 1
		end := start + int(size)
		if raw[end] != '\r' || raw[end+1] != '\n' {
			return argv, false
		}
		argv = append(argv, raw[start:end:end])
		pos = end + 2
	}
	return argv, true
}

func (f *framer) headerErr() error {
	if f.state == inCount {
		return errors.New("invalid multibulk length")
	}
	return errors.New("invalid bulk length")
}

// framedConn is a client connection read through a framer. On a framing
// error it hands redcon the well-framed bytes before it; at the next read,
// once redcon has answered those, it answers the client
// "-ERR Protocol error: ..." itself and fails the read, which closes the
// connection. Nothing a header announces is ever allocated.
type framedConn struct {
	net.Conn
	f    framer
	ferr error // the framing error to report at the next Read
}

func (c *framedConn) Read(p []byte) (int, error) {
	if c.ferr != nil {
		return 0, c.fail()
	}
	n, err := c.Conn.Read(p)
	good, ferr := c.f.scan(p[:n])
	if ferr == nil {
		return n, err
	}
	c.ferr = ferr
	if good == 0 {
		return 0, c.fail()
	}
	return good, nil
}

func (c *framedConn) fail() error {
	// redcon's writes happen between its reads, on this goroutine, so this
	// reply cannot interleave with one of them.
	c.Conn.Write(appendProtocolError(nil, c.ferr.Error()))
	return errProtocolClosed
}

// appendProtocolError is the one reply to bytes that are not RESP; the
// connection closes after it, as Redis closes it.
func appendProtocolError(b []byte, msg string) []byte {
	return redcon.AppendError(b, "ERR Protocol error: "+msg)
}

var errProtocolClosed = errors.New("proxy: protocol error")

// framedListener wraps every accepted connection in a framer.
type framedListener struct {
	net.Listener
	f framer // a new connection's
}

func (l *framedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framedConn{Conn: c, f: l.f}, nil
}
