package lua

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// The encoders and decoders below let a caller that owns its connections
// (a pipeline of raw RESP, no client library) send steps and read their
// replies without an allocation per bucket.

// AppendOne appends to buf the RESP of the declared EVALSHA that Do sends
// for call.
func (t *Throttle) AppendOne(buf []byte, call Call) []byte {
	return t.appendOne(buf, &call, false)
}

// AppendOneEval is AppendOne as EVAL, for a node that answered NOSCRIPT.
func (t *Throttle) AppendOneEval(buf []byte, call Call) []byte {
	return t.appendOne(buf, &call, true)
}

// AppendMany appends to buf the RESP of one EVALSHA that decides calls in
// order, all on the node it is sent to (see DoMany).
func (t *Throttle) AppendMany(buf []byte, calls []Call) []byte {
	return t.appendMany(buf, calls, false)
}

// AppendManyEval is AppendMany as EVAL, for a node that answered NOSCRIPT.
func (t *Throttle) AppendManyEval(buf []byte, calls []Call) []byte {
	return t.appendMany(buf, calls, true)
}

func (t *Throttle) appendOne(buf []byte, c *Call, eval bool) []byte {
	argc := c.argc()
	buf = t.appendHead(buf, eval, 2+argc)
	buf = appendBulk(buf, "1")
	buf = appendBulk(buf, c.Key)
	buf = appendBulkInt(buf, c.Interval.Capacity)
	buf = appendBulkInt(buf, c.Interval.U)
	buf = appendBulkInt(buf, c.Interval.V)
	buf = appendBulkInt(buf, c.Cost)
	if argc >= 5 {
		buf = appendBulk(buf, c.base())
	}
	if argc >= 6 {
		buf = appendBulkInt(buf, max(c.N, 1))
	}
	if argc == 7 {
		buf = appendBulkInt(buf, c.Now)
	}
	return buf
}

func (t *Throttle) appendMany(buf []byte, calls []Call, eval bool) []byte {
	stride := manyStride(calls)
	buf = t.appendHead(buf, eval, 2+stride*len(calls))
	buf = appendBulk(buf, "0")
	buf = appendBulkInt(buf, int64(stride))
	for i := range calls {
		c := &calls[i]
		buf = appendBulk(buf, c.Key)
		buf = appendBulkInt(buf, c.Interval.Capacity)
		buf = appendBulkInt(buf, c.Interval.U)
		buf = appendBulkInt(buf, c.Interval.V)
		buf = appendBulkInt(buf, c.Cost)
		buf = appendBulk(buf, c.Base)
		buf = appendBulkInt(buf, max(c.N, 1))
		if stride == 8 {
			buf = appendBulkInt(buf, c.Now)
		}
	}
	return buf
}

// appendHead starts a command of EVALSHA (or EVAL), the script, and n
// more arguments.
func (t *Throttle) appendHead(buf []byte, eval bool, n int) []byte {
	buf = append(buf, '*')
	buf = strconv.AppendInt(buf, int64(2+n), 10)
	buf = append(buf, "\r\n"...)
	if eval {
		buf = appendBulk(buf, "EVAL")
		return appendBulk(buf, throttleSrc)
	}
	buf = appendBulk(buf, "EVALSHA")
	return appendBulk(buf, t.sha1)
}

func appendBulk(buf []byte, s string) []byte {
	buf = append(buf, '$')
	buf = strconv.AppendInt(buf, int64(len(s)), 10)
	buf = append(buf, "\r\n"...)
	buf = append(buf, s...)
	return append(buf, "\r\n"...)
}

func appendBulkInt(buf []byte, v int64) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], v, 10)
	buf = append(buf, '$')
	buf = strconv.AppendInt(buf, int64(len(d)), 10)
	buf = append(buf, "\r\n"...)
	buf = append(buf, d...)
	return append(buf, "\r\n"...)
}

// ErrProtocol means bytes that are no RESP reply: the connection is out of
// step with its replies and must be closed.
var ErrProtocol = errors.New("lua: not a RESP reply")

// DecodeOne reads the reply to one declared call (AppendOne) at the
// start of buf. n is 0 while buf does not hold the whole reply: read more
// (err is nil) or give up the connection (ErrProtocol: it is out of step).
// Otherwise n is the reply's length, and err is an *Error for an error
// reply (NOSCRIPT, MOVED, ASK, CLUSTERDOWN, BUSY, WRONGTYPE, a script
// error), another error for a reply of the wrong shape, or nil. out is
// the answer (a split bucket's Err is a *SplitError), or has Err err.
func DecodeOne(buf []byte, out *Outcome) (n int, err error) {
	n, err = decodeOne(buf, out)
	if n > 0 && err != nil {
		*out = Outcome{Err: err}
	}
	return n, err
}

func decodeOne(buf []byte, out *Outcome) (n int, err error) {
	b, count, i, err := top(buf)
	if len(b) == 0 || err != nil {
		return len(b), err
	}
	var v [5]value
	for k := range min(count, len(v)) {
		v[k], i = next(b, i)
	}
	switch {
	case count == 3 && v[0].is(':') && v[0].n == 2 && v[1].is('$') && v[2].is(':'):
		*out = Outcome{Err: splitError(string(v[1].text), v[2].n)}
	case (count == 4 || count == 5) && v[0].is(':') && v[1].is(':') && v[2].is(':') && v[3].is(':') && (count == 4 || v[4].is(':')) && v[0].n >= 0 && v[0].n <= 1:
		taken := v[4].n
		if count == 4 {
			taken = 1 - v[0].n
		}
		*out = decided(v[0].n, [4]int64{v[1].n, v[2].n, v[3].n, taken})
	default:
		return len(b), fmt.Errorf("lua: throttle answered %.80q, want 4 or 5 integers or a split", b)
	}
	return len(b), nil
}

// DecodeMany reads the reply to one many call (AppendMany) of len(out)
// calls at the start of buf, as DecodeOne does, into one Outcome per call.
// When n > 0 and err is not nil, every Outcome's Err is err.
func DecodeMany(buf []byte, out []Outcome) (n int, err error) {
	n, err = decodeMany(buf, out)
	if n > 0 && err != nil {
		for k := range out {
			out[k] = Outcome{Err: err}
		}
	}
	return n, err
}

func decodeMany(buf []byte, out []Outcome) (n int, err error) {
	b, count, i, err := top(buf)
	if len(b) == 0 || err != nil {
		return len(b), err
	}
	if count != 5*len(out) {
		return len(b), fmt.Errorf("lua: throttle answered %d values for %d buckets, want 5 each", count, len(out))
	}
	for k := range out {
		if j, ok := decidedAt(b, i, &out[k]); ok {
			i = j
			continue
		}
		// The rare answers, and the wrong shapes.
		var v [5]value
		for e := range v {
			v[e], i = next(b, i)
		}
		o, ok := bucketOutcome(&v)
		if !ok {
			return len(b), fmt.Errorf("lua: throttle answered %.80q for bucket %d", b, k)
		}
		out[k] = o
	}
	return len(b), nil
}

// decidedAt reads a decided bucket's five integers at b[i:], the common
// answer, into o, and returns the offset after them; ok is false for
// any other answer.
func decidedAt(b []byte, i int, o *Outcome) (j int, ok bool) {
	var x [5]int64
	j = i
	for e := range x {
		if x[e], j, ok = intAt(b, j); !ok {
			return i, false
		}
	}
	if x[0] != 0 && x[0] != 1 {
		return i, false
	}
	*o = decided(x[0], [4]int64(x[1:]))
	return j, true
}

// intAt reads the integer at b[i:] of a whole reply (replyLen checked its
// digits and range) and returns the offset after it.
func intAt(b []byte, i int) (n int64, j int, ok bool) {
	if b[i] != ':' {
		return 0, i, false
	}
	j = i + 1
	neg := b[j] == '-'
	if neg {
		j++
	}
	for ; b[j] != '\r'; j++ {
		n = n*10 + int64(b[j]-'0')
	}
	if neg {
		n = -n
	}
	return n, j + 2, true
}

// bucketOutcome reads one bucket's five values of a many reply.
func bucketOutcome(v *[5]value) (Outcome, bool) {
	if !v[0].is(':') {
		return Outcome{}, false
	}
	switch v[0].n {
	case 0, 1:
		if !v[1].is(':') || !v[2].is(':') || !v[3].is(':') || !v[4].is(':') {
			return Outcome{}, false
		}
		return decided(v[0].n, [4]int64{v[1].n, v[2].n, v[3].n, v[4].n}), true
	case 2:
		if !v[1].is('$') || !v[2].is(':') {
			return Outcome{}, false
		}
		return Outcome{Err: splitError(string(v[1].text), v[2].n)}, true
	case 3:
		if !v[1].is('$') {
			return Outcome{}, false
		}
		return Outcome{Err: &Error{Msg: string(v[1].text)}}, true
	}
	return Outcome{}, false
}

// top finds the whole reply at the start of buf: b is it (empty while it
// is not all there), and an array's count and first element's offset; an
// error reply is an *Error.
func top(buf []byte) (b []byte, count, i int, err error) {
	n, err := replyLen(buf)
	if n == 0 || err != nil {
		return nil, 0, 0, err
	}
	b = buf[:n]
	v, i := next(b, 0)
	switch v.kind {
	case '-', '!':
		return b, 0, 0, &Error{Msg: string(v.text)}
	case '*':
		if v.n >= 0 {
			return b, int(v.n), i, nil
		}
	}
	return b, 0, 0, fmt.Errorf("lua: throttle answered %.80q, want an array", b)
}

// value is one element of a reply: an integer (or an array's count), or
// a string.
type value struct {
	kind byte // the RESP type: ':', '$', '*', ...
	n    int64
	text []byte
}

func (v *value) is(kind byte) bool { return v.kind == kind }

// next reads the value at b[i:] and returns it and the offset after it,
// or, for an array, its count and the offset of its first element. b is
// a whole reply (replyLen), so every line ends and every integer parses.
func next(b []byte, i int) (value, int) {
	v := value{kind: b[i]}
	end := i + 1 + bytes.IndexByte(b[i+1:], '\r')
	line := b[i+1 : end]
	i = end + 2
	switch v.kind {
	case ':', '*':
		v.n, _ = parseInt(line)
	case '$', '!':
		if size, _ := parseInt(line); size >= 0 {
			v.text = b[i : i+int(size)]
			i += int(size) + 2
		}
	case '+', '-':
		v.text = line
	}
	return v, i
}

// replyLen is the length of the whole RESP reply at the start of b: 0
// while it is not all there, with ErrProtocol when it never will be. It
// knows RESP2 and RESP3's null and bulk error: a script's replies.
func replyLen(b []byte) (int, error) {
	i, pending := 0, 1
	for pending > 0 {
		if i == len(b) {
			return 0, nil
		}
		kind := b[i]
		if !known(kind) {
			return 0, ErrProtocol
		}
		end := i + 1
		for end < len(b) && b[end] != '\r' && b[end] != '\n' {
			end++
		}
		switch {
		case end < len(b) && b[end] == '\n', end+1 < len(b) && b[end+1] != '\n':
			return 0, ErrProtocol
		case end+1 >= len(b):
			return 0, nil
		}
		line := b[i+1 : end]
		i = end + 2
		pending--
		if kind == '+' || kind == '-' {
			continue
		}
		if kind == '_' {
			if len(line) != 0 {
				return 0, ErrProtocol
			}
			continue
		}
		n, ok := parseInt(line)
		switch {
		case !ok || (kind != ':' && (n < -1 || (n == -1 && kind == '!'))):
			return 0, ErrProtocol
		case kind == '*':
			// Saturated: more values than bytes left is as good as any.
			pending += int(min(max(n, 0), int64(len(b))))
			pending = min(pending, len(b)+1)
		case kind == '$' || kind == '!':
			if n == -1 {
				continue
			}
			if n > int64(len(b)-i-2) {
				return 0, nil
			}
			i += int(n) + 2
			if b[i-2] != '\r' || b[i-1] != '\n' {
				return 0, ErrProtocol
			}
		}
	}
	return i, nil
}

// known reports whether replyLen reads values of this RESP type.
func known(kind byte) bool {
	switch kind {
	case '+', '-', '_', ':', '$', '!', '*':
		return true
	}
	return false
}

// parseInt reads a RESP integer: an optional '-' and 1 to 19 digits, in
// int64's range.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}
