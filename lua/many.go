package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Outcome is one call's answer from a many-bucket step.
type Outcome struct {
	// Result is the step's outcome, the last of its N calls'; zero when
	// Err is set.
	Result
	// Taken is how many of the call's N calls took their cost, the first
	// ones (for N <= 1: 1 when allowed, else 0).
	Taken int64
	// Err, when not nil, is why the bucket was not decided; it took
	// nothing. A *SplitError: the bucket is split. An *Error: the bucket's
	// key is not a bucket (IsWrongType), is not served by the node, or the
	// cluster is down (IsNotLocal, IsClusterDown: send that call again,
	// declared, to follow MOVED and ASK), or Redis refused its GET or SET
	// (OOM, READONLY...).
	Err error
}

// Error is an error reply, of a whole call or of one bucket of a many
// call, as Redis worded it (without the leading '-'): "NOSCRIPT No
// matching script...", "MOVED 3999 127.0.0.1:6381". Its methods follow
// rueidis's RedisError.
type Error struct {
	Msg string
}

func (e *Error) Error() string { return e.Msg }

// ErrorOf is the script's own error in err's chain, or nil. Nil costs no
// allocation, as errors.As with a variable of the caller's would on every
// step decided.
func ErrorOf(err error) *Error {
	if err == nil {
		return nil
	}
	var le *Error
	if errors.As(err, &le) {
		return le
	}
	return nil
}

// IsNoScript: the node does not have the script; send it with EVAL.
func (e *Error) IsNoScript() bool { return strings.HasPrefix(e.Msg, "NOSCRIPT") }

// IsMoved returns the address a MOVED sends the call to.
func (e *Error) IsMoved() (addr string, ok bool) { return e.redirect("MOVED ") }

// IsAsk returns the address an ASK sends the call to, once, after ASKING.
func (e *Error) IsAsk() (addr string, ok bool) { return e.redirect("ASK ") }

// redirect reads "<kind> <slot> <addr>".
func (e *Error) redirect(kind string) (string, bool) {
	rest, ok := strings.CutPrefix(e.Msg, kind)
	if !ok {
		return "", false
	}
	_, addr, ok := strings.Cut(rest, " ")
	return addr, ok
}

// IsClusterDown: the cluster is down, for the whole call (CLUSTERDOWN) or,
// in a many call, for a bucket (the script's "...while the cluster is
// down").
func (e *Error) IsClusterDown() bool {
	return strings.HasPrefix(e.Msg, "CLUSTERDOWN") ||
		(strings.Contains(e.Msg, "Script attempted to execute") && strings.Contains(e.Msg, "while the cluster is down"))
}

// IsNotLocal: in a many call, the bucket's key is of a slot this node does
// not serve (any more, or not yet: an importing slot, or a migrating one
// whose key has moved already).
func (e *Error) IsNotLocal() bool {
	return strings.Contains(e.Msg, "Script attempted to access a non local key")
}

// IsTryAgain: a command of several keys met a slot being migrated.
func (e *Error) IsTryAgain() bool { return strings.HasPrefix(e.Msg, "TRYAGAIN") }

// IsBusy: a script or function runs too long on the node.
func (e *Error) IsBusy() bool { return strings.HasPrefix(e.Msg, "BUSY ") }

// IsLoading: the node is loading its data set.
func (e *Error) IsLoading() bool { return strings.HasPrefix(e.Msg, "LOADING") }

// IsWrongType: the key holds something that is not a bucket.
func (e *Error) IsWrongType() bool { return strings.HasPrefix(e.Msg, "WRONGTYPE") }

// DoMany runs one script call that decides calls, in order, on the node c
// talks to: c must be a client of that one node (a cluster client would
// send a call without keys anywhere). out (len(calls)) gets one Outcome
// per call; an error of the whole call (a timeout, BUSY, LOADING) is every
// one's Err. A key of a slot being migrated belongs in a declared call
// (Do), where MOVED and ASK work.
func (t *Throttle) DoMany(ctx context.Context, c rueidis.Client, calls []Call, out []Outcome) {
	args := manyArgs(calls)
	r := c.Do(ctx, c.B().Evalsha().Sha1(t.sha1).Numkeys(0).Arg(args...).Build())
	if e, ok := rueidis.IsRedisErr(r.Error()); ok && e.IsNoScript() {
		r = c.Do(ctx, c.B().Eval().Script(throttleSrc).Numkeys(0).Arg(args...).Build())
	}
	if err := readMany(r, out); err != nil {
		for i := range out {
			out[i] = Outcome{Err: err}
		}
	}
}

// manyArgs is calls' ARGV in a many call (see throttle.lua).
func manyArgs(calls []Call) []string {
	args := make([]string, 0, 1+manyArgc(calls))
	args = append(args, "2")
	for i := range calls {
		c := &calls[i]
		if i > 0 && sameNumbers(c, &calls[i-1]) {
			args = append(args, c.Key, "=")
			continue
		}
		args = append(args, c.Key,
			strconv.FormatInt(c.Capacity, 10),
			strconv.FormatInt(c.U, 10),
			strconv.FormatInt(c.V, 10),
			strconv.FormatInt(c.Cost, 10),
			c.Base,
			strconv.FormatInt(max(c.N, 1), 10),
			strconv.FormatInt(c.Now, 10))
	}
	return args
}

// manyArgc is the number of ARGV calls take after the format's: 2 for a
// bucket of the same numbers as the one before, else 8.
func manyArgc(calls []Call) int {
	n := 0
	for i := range calls {
		if i > 0 && sameNumbers(&calls[i], &calls[i-1]) {
			n += 2
		} else {
			n += 8
		}
	}
	return n
}

// sameNumbers: a and b differ only in their keys.
func sameNumbers(a, b *Call) bool {
	return a.Capacity == b.Capacity && a.U == b.U && a.V == b.V && a.Cost == b.Cost &&
		a.Base == b.Base && max(a.N, 1) == max(b.N, 1) && a.Now == b.Now
}

// readMany reads a many call's reply as rueidis parsed it.
func readMany(r rueidis.RedisResult, out []Outcome) error {
	msgs, err := r.ToArray()
	if err != nil {
		return err
	}
	if len(msgs) != 5*len(out) {
		return fmt.Errorf("lua: throttle answered %d values for %d buckets, want 5 each", len(msgs), len(out))
	}
	for k := range out {
		o, ok := bucketOutcome(msgs[5*k : 5*k+5])
		if !ok {
			return fmt.Errorf("lua: throttle answered values of the wrong types for bucket %d", k)
		}
		out[k] = o
	}
	return nil
}

// errWrongType is the script's answer for a key that is not a bucket.
const errWrongType = "WRONGTYPE key holds a value that is not a sluice bucket"

// WrongType is the error of a key that is not a bucket, as the script
// gives it.
func WrongType() error { return &Error{Msg: errWrongType} }

// splitError is the answer {2, marker, ms} as an error. A marker sluice
// cannot read was not written by sluice (split.lua writes none such) but
// by a caller, through passthrough: its key is not a bucket, and that is
// the key's error, WRONGTYPE, not its shard's failure, which would send
// every key of the shard to the fallback.
func splitError(marker string, ms int64) error {
	split, ok := Marker(marker)
	if !ok {
		return &Error{Msg: errWrongType}
	}
	split.TTL = time.Duration(ms) * time.Millisecond
	return &SplitError{Split: split}
}

// bucketOutcome reads one bucket's five values of a many reply: a
// decision {0|1, remaining, retry_after_us, reset_after_us, taken}, a split
// {2, marker, ms, 0, 0} or an error {3, message, 0, 0, 0}.
func bucketOutcome(v []rueidis.RedisMessage) (Outcome, bool) {
	var n [5]int64
	for e := range v {
		n[e], _ = v[e].AsInt64() // a string's is set aside below
	}
	switch {
	case !v[0].IsInt64():
	case n[0] == 0 || n[0] == 1:
		if v[1].IsInt64() && v[2].IsInt64() && v[3].IsInt64() && v[4].IsInt64() {
			return Outcome{Result: Result{Limited: n[0] == 1, Remaining: n[1], RetryAfter: n[2], ResetAfter: n[3]}, Taken: n[4]}, true
		}
	case n[0] == 2:
		if marker, err := v[1].ToString(); err == nil && v[2].IsInt64() {
			return Outcome{Err: splitError(marker, n[2])}, true
		}
	case n[0] == 3:
		if msg, err := v[1].ToString(); err == nil {
			return Outcome{Err: &Error{Msg: msg}}, true
		}
	}
	return Outcome{}, false
}
