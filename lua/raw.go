package lua

import (
	"bytes"
	"fmt"
	"strconv"
)

// AppendMany appends one many call deciding calls, in order, as the RESP
// command a client sends (EVALSHA of throttle.lua with no keys), for a
// caller that writes it on a connection of its own to the node. Its reply
// is read by ReadMany; NOSCRIPT means the node needs the script (Load).
func (t *Throttle) AppendMany(dst []byte, calls []Call) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(4+manyArgc(calls)), 10)
	dst = append(dst, "\r\n$7\r\nEVALSHA\r\n$40\r\n"...)
	dst = append(dst, t.sha1...)
	dst = append(dst, "\r\n$1\r\n0\r\n$1\r\n2\r\n"...)
	for i := range calls {
		c := &calls[i]
		dst = appendBulk(dst, c.Key)
		if i > 0 && sameNumbers(c, &calls[i-1]) {
			dst = append(dst, "$1\r\n=\r\n"...)
			continue
		}
		dst = appendBulkInt(dst, c.Capacity)
		dst = appendBulkInt(dst, c.U)
		dst = appendBulkInt(dst, c.V)
		dst = appendBulkInt(dst, c.Cost)
		dst = appendBulk(dst, c.Base)
		dst = appendBulkInt(dst, max(c.N, 1))
		dst = appendBulkInt(dst, c.Now)
	}
	return dst
}

// AppendLoad appends SCRIPT LOAD of throttle.lua, for a connection that
// sends AppendMany's calls: loaded before the first, none is answered
// NOSCRIPT.
func (t *Throttle) AppendLoad(dst []byte) []byte {
	dst = append(dst, "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n"...)
	return appendBulk(dst, throttleSrc)
}

func appendBulk(dst []byte, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

func appendBulkInt(dst []byte, n int64) []byte {
	var b [20]byte
	d := strconv.AppendInt(b[:0], n, 10)
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(d)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, d...)
	return append(dst, '\r', '\n')
}

// ReadMany reads a many call's whole RESP reply (RESP2 or RESP3), as the
// node sent it, into out (one Outcome per call). An error reply of the
// whole call is returned as an *Error; so is nothing else.
func ReadMany(r []byte, out []Outcome) error {
	if len(r) > 0 && r[0] == '-' {
		return &Error{Msg: string(bytes.TrimSuffix(r[1:], []byte("\r\n")))}
	}
	n, rest, ok := rawLine(r, '*')
	if !ok || n != int64(5*len(out)) {
		return fmt.Errorf("lua: throttle answered %.40q for %d buckets", r, len(out))
	}
	for k := range out {
		if o, after, ok := decided(rest); ok {
			out[k], rest = o, after
			continue
		}
		var v [5]rawValue
		for e := range v {
			if v[e], rest, ok = rawElem(rest); !ok {
				return fmt.Errorf("lua: throttle answered values of the wrong types for bucket %d", k)
			}
		}
		o, ok := rawOutcome(v)
		if !ok {
			return fmt.Errorf("lua: throttle answered values of the wrong types for bucket %d", k)
		}
		out[k] = o
	}
	return nil
}

// decided reads a bucket of a many reply that is a decision, the common
// case: five integers, the first 0 or 1, each of at most 18 digits. It
// gives what the general reading (rawElem, rawOutcome) gives for them, at
// a fraction of its cost (BenchmarkBucketRound), and leaves anything else
// to it.
func decided(b []byte) (Outcome, []byte, bool) {
	var v [5]int64
	for e := range v {
		var ok bool
		if len(b) == 0 || b[0] != ':' {
			return Outcome{}, nil, false
		}
		if v[e], b, ok = shortInt(b); !ok {
			return Outcome{}, nil, false
		}
	}
	if v[0] != 0 && v[0] != 1 {
		return Outcome{}, nil, false
	}
	return Outcome{Result: Result{Limited: v[0] == 1, Remaining: v[1], RetryAfter: v[2], ResetAfter: v[3]}, Taken: v[4]}, b, true
}

// rawValue is one element of a many reply: an integer or a string.
type rawValue struct {
	n     int64
	s     []byte
	isInt bool
}

// rawOutcome is bucketOutcome for a raw reply.
func rawOutcome(v [5]rawValue) (Outcome, bool) {
	if !v[0].isInt {
		return Outcome{}, false
	}
	switch v[0].n {
	case 0, 1:
		if v[1].isInt && v[2].isInt && v[3].isInt && v[4].isInt {
			return Outcome{Result: Result{Limited: v[0].n == 1, Remaining: v[1].n, RetryAfter: v[2].n, ResetAfter: v[3].n}, Taken: v[4].n}, true
		}
	case 2:
		if !v[1].isInt && v[2].isInt {
			return Outcome{Err: splitError(string(v[1].s), v[2].n)}, true
		}
	case 3:
		if !v[1].isInt {
			return Outcome{Err: &Error{Msg: string(v[1].s)}}, true
		}
	}
	return Outcome{}, false
}

// rawElem reads an integer or a bulk string at the start of b.
func rawElem(b []byte) (rawValue, []byte, bool) {
	if len(b) == 0 {
		return rawValue{}, nil, false
	}
	switch b[0] {
	case ':':
		n, rest, ok := rawLine(b, ':')
		return rawValue{n: n, isInt: true}, rest, ok
	case '$':
		n, rest, ok := rawLine(b, '$')
		if !ok || n < 0 || int64(len(rest)) < n+2 || rest[n] != '\r' || rest[n+1] != '\n' {
			return rawValue{}, nil, false
		}
		return rawValue{s: rest[:n]}, rest[n+2:], true
	}
	return rawValue{}, nil, false
}

// shortInt reads ":<integer>\r\n" at the start of b (its ':' checked by
// the caller) as rawLine does, for an integer of at most 18 digits, which
// cannot overflow, in one pass, where rawLine finds the line's end with
// IndexByte and then reads its digits.
func shortInt(b []byte) (int64, []byte, bool) {
	i := 1
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var n int64
	for ; i < len(b) && i-start < 18 && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + int64(b[i]-'0')
	}
	if i == start || i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, nil, false
	}
	if neg {
		n = -n
	}
	return n, b[i+2:], true
}

// rawLine reads "<typ><integer>\r\n" at the start of b. An array's or a
// bulk string's length has no sign, as reply.Read reads it: "*-0" and
// "$-0" are no replies.
func rawLine(b []byte, typ byte) (int64, []byte, bool) {
	end := bytes.IndexByte(b, '\n')
	if len(b) < 4 || b[0] != typ || end < 2 || b[end-1] != '\r' || (typ != ':' && b[1] == '-') {
		return 0, nil, false
	}
	n, ok := parseInt(b[1 : end-1])
	if !ok {
		return 0, nil, false
	}
	return n, b[end+1:], true
}

// parseInt reads a decimal integer as strconv.ParseInt does, without
// making a string of it: five per bucket of a reply.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' || n > 1<<63/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > 1<<63-1+uint64(btoi(neg)) {
		return 0, false
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
