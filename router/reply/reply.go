// Package reply finds where one RESP reply ends without decoding it. A proxy
// in front of Redis forwards each server reply to its client byte for byte,
// in RESP2 and in RESP3 alike (a client may switch with HELLO 3), so it needs
// a reply's extent, not its meaning. The reply is checked only as far as
// that takes: enough that a broken or hostile server cannot make the proxy
// allocate for bytes that never arrive, nest without bound, or pass half a
// reply on as a whole one.
package reply

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// ErrProtocol is wrapped by every error Read returns for bytes that are not
// a well-formed reply. Nothing after such bytes can be trusted to start a
// reply, so the connection they came on is best closed.
var ErrProtocol = errors.New("protocol error")

const (
	// maxDepth bounds a reply's nesting above the deepest Redis makes: a
	// script's table, converted level by level within Lua's C stack
	// (LUAI_MAXCSTACK, 8000), nests up to about 7,990 levels, which
	// Redis sends as they are. A limit below that would take a node's
	// own reply for a protocol error and break the connection it came
	// on, with every other client's command on it.
	maxDepth = 8192

	// chunk is the least dst grows by ahead of the bytes that fill it; it
	// grows by at most what it holds, so a declared length costs memory
	// only as its bytes arrive (at most twice what arrived).
	chunk = 64 << 10

	// maxLen keeps length arithmetic (2n+1 elements of an attribute, n+2
	// bytes of a body and its CRLF) from overflowing int64; no server
	// declares anything near. It is a length's largest allowed value: 2^62
	// pairs would be 2^63 elements, which wraps negative.
	maxLen = 1<<62 - 1
)

// Read appends one whole reply read from r to dst and returns it, with its
// type byte at dst[len(dst_in)]. An attribute ('|') and the reply it
// annotates are read as one, since neither means anything without the other.
// Streamed RESP3 aggregates and strings ("*?", "$?") are not supported.
//
// Read returns io.EOF if r ends before the reply's first byte,
// io.ErrUnexpectedEOF if it ends within the reply, other errors from r as
// they are, and an error wrapping ErrProtocol for a malformed reply. On any
// error it returns dst as it was passed, and r is left mid-reply.
func Read(r *bufio.Reader, dst []byte) ([]byte, error) {
	start := len(dst)
	// open holds, innermost last, how many elements each aggregate being
	// read is still owed; the reply is whole once an element completes with
	// it empty. An attribute of n pairs is owed 2n+1: its pairs, then the
	// reply it annotates. A small constant capacity keeps it off the heap
	// for all but freakishly deep replies.
	open := make([]int64, 0, 16)
	for {
		at := len(dst)
		var err error
		if dst, err = readLine(r, dst); err != nil {
			if err == io.EOF && len(dst) > start {
				err = io.ErrUnexpectedEOF
			}
			return dst[:start], err
		}
		end := len(dst)
		if end-at < 2 || dst[end-2] != '\r' {
			return dst[:start], fmt.Errorf("reply: line not ended by CRLF: %w", ErrProtocol)
		}
		if end-at == 2 {
			return dst[:start], fmt.Errorf("reply: empty line: %w", ErrProtocol)
		}
		typ := dst[at]
		body, elems, err := parseLine(typ, dst[at+1:end-2])
		if err != nil {
			return dst[:start], err
		}

		if body >= 0 {
			if dst, err = readN(r, dst, body+2); err != nil {
				return dst[:start], err
			}
			end = len(dst)
			if dst[end-2] != '\r' || dst[end-1] != '\n' {
				return dst[:start], fmt.Errorf("reply: %q body not followed by CRLF: %w", typ, ErrProtocol)
			}
			// A verbatim string starts with its three-letter format and a
			// colon, which the client will strip.
			if typ == '=' && (body < 4 || dst[end-2-int(body)+3] != ':') {
				return dst[:start], fmt.Errorf("reply: verbatim string without format: %w", ErrProtocol)
			}
		}

		if elems > 0 {
			if len(open) == maxDepth {
				return dst[:start], fmt.Errorf("reply: nested deeper than %d: %w", maxDepth, ErrProtocol)
			}
			open = append(open, elems)
			continue
		}
		// One element is whole, which may complete the aggregates around it.
		for {
			last := len(open) - 1
			if last < 0 {
				return dst, nil
			}
			if open[last]--; open[last] > 0 {
				break
			}
			open = open[:last]
		}
	}
}

// parseLine reads a reply's line, its type byte typ and what follows it
// (CRLF excluded): how many bytes follow it before their own CRLF (body),
// how many elements (elems), -1 for none; an error for a line Read
// refuses.
func parseLine(typ byte, text []byte) (body, elems int64, err error) {
	body, elems = -1, -1
	ok := true
	switch typ {
	case '+', '-':
	case '(':
		// Not checked: Redis 7.0 passes a Lua script's big_number ("(x1",
		// "(") on as it is, and refusing it would close a node connection
		// other clients' replies are on. A line is whole whatever it holds.
	case ':':
		ok = isInteger(text)
	case ',':
		ok = isDouble(text)
	case '#':
		ok = len(text) == 1 && (text[0] == 't' || text[0] == 'f')
	case '_':
		ok = len(text) == 0
	case '$', '!', '=':
		body, err = length(typ, text)
	case '*', '~', '>':
		elems, err = length(typ, text)
	case '%':
		elems, err = length(typ, text)
		elems *= 2
	case '|':
		elems, err = length(typ, text)
		elems = 2*elems + 1
	default:
		err = fmt.Errorf("reply: unknown type byte %q: %w", typ, ErrProtocol)
	}
	if !ok {
		err = fmt.Errorf("reply: malformed %q line: %w", typ, ErrProtocol)
	}
	return body, elems, err
}

// readLine appends the next line of r, its '\n' included, to dst. A line
// longer than r's buffer is appended a buffer at a time.
func readLine(r *bufio.Reader, dst []byte) ([]byte, error) {
	for {
		line, err := r.ReadSlice('\n')
		dst = append(dst, line...)
		if err != bufio.ErrBufferFull {
			return dst, err
		}
	}
}

// readN appends the next n bytes of r to dst.
func readN(r *bufio.Reader, dst []byte, n int64) ([]byte, error) {
	for n > 0 {
		k := int(min(n, chunk))
		if cap(dst)-len(dst) < k {
			// At least doubled, as far as the declared length: grown by
			// a chunk at a time (append's 1.25x for big slices), a bulk
			// of a MB allocated about five times its size.
			dst = slices.Grow(dst, int(min(n, max(chunk, int64(len(dst))))))
		}
		got, err := io.ReadFull(r, dst[len(dst):len(dst)+k])
		dst = dst[:len(dst)+got]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return dst, err
		}
		n -= int64(k)
	}
	return dst, nil
}

// length is the count after a bulk or aggregate type byte. RESP2's nulls
// "$-1" and "*-1" are -1.
func length(typ byte, text []byte) (int64, error) {
	if string(text) == "-1" && (typ == '$' || typ == '*') {
		return -1, nil
	}
	if string(text) == "?" {
		return 0, fmt.Errorf("reply: streamed %q replies are not supported: %w", typ, ErrProtocol)
	}
	n, ok := parseUint(text, maxLen)
	if !ok {
		return 0, fmt.Errorf("reply: bad %q length: %w", typ, ErrProtocol)
	}
	return int64(n), nil
}

// parseUint parses decimal digits, failing on anything else, on no digits,
// and above max.
func parseUint(b []byte, max uint64) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		d := uint64(c - '0')
		if d > 9 || n > (max-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// isInteger reports whether b is a signed 64-bit integer, the range a
// client decodes ':' into.
func isInteger(b []byte) bool {
	var max uint64 = math.MaxInt64
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		if b[0] == '-' {
			max++
		}
		b = b[1:]
	}
	_, ok := parseUint(b, max)
	return ok
}

// isDouble reports whether b is a double as RESP3 spells it:
// [sign]integral[.fraction][e[sign]exponent], inf, -inf, nan or -nan (Redis
// 7.0 prints doubles with "%.17g", and so a NaN with its sign bit set, as
// Lua's 0/0 is, as "-nan").
func isDouble(b []byte) bool {
	switch string(b) {
	case "inf", "-inf", "nan", "-nan":
		return true
	}
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	b, ok := digits(b)
	if ok && len(b) > 0 && b[0] == '.' {
		b, ok = digits(b[1:])
	}
	if ok && len(b) > 0 && (b[0] == 'e' || b[0] == 'E') {
		b = b[1:]
		if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
			b = b[1:]
		}
		b, ok = digits(b)
	}
	return ok && len(b) == 0
}

// digits skips the decimal digits b starts with, reporting whether there
// was at least one.
func digits(b []byte) ([]byte, bool) {
	i := 0
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return b[i:], i > 0
}
