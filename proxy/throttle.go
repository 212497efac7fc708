package proxy

import (
	"errors"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
)

var (
	errCapacity = errors.New("capacity must be a positive integer")
	errRefill   = errors.New("refill must be a positive integer")
	errCost     = errors.New("cost must be a non-negative integer")
	errRange    = errors.New("capacity, refill and period out of range: the bucket cannot be computed exactly")

	errMaxBurst   = errors.New("max_burst must be a non-negative integer")
	errCount      = errors.New("count must be a positive integer")
	errCellPeriod = errors.New("period must be a positive integer (seconds)")
	errQuantity   = errors.New("quantity must be a non-negative integer")
)

// parseThrottle parses THROTTLE key capacity refill period [cost], the
// limit inline (Policies.request parses the policy forms).
func parseThrottle(args [][]byte) (router.Request, error) {
	if len(args) < 5 || len(args) > 6 {
		return router.Request{}, errThrottleNArgs
	}
	capacity, ok := parseInt(args[2])
	if !ok || capacity < 1 {
		return router.Request{}, errCapacity
	}
	refill, ok := parseInt(args[3])
	if !ok || refill < 1 {
		return router.Request{}, errRefill
	}
	period, err := parsePeriod(args[4])
	if err != nil {
		return router.Request{}, err
	}
	cost := int64(1)
	if len(args) == 6 {
		if cost, ok = parseInt(args[5]); !ok || cost < 0 {
			return router.Request{}, errCost
		}
	}
	return takeRequest(args[1], bucket.Limit{Capacity: capacity, Refill: refill, Period: period}, cost)
}

// parseCellThrottle parses redis-cell's CL.THROTTLE key max_burst count
// period [quantity]: a bucket of max_burst+1 tokens refilled with count
// tokens every period seconds. It is the same bucket THROTTLE uses.
func parseCellThrottle(args [][]byte) (router.Request, error) {
	if len(args) > 6 {
		return router.Request{}, errors.New("wrong number of arguments for 'cl.throttle' command")
	}
	burst, ok := parseCellInt(args[2])
	if !ok || burst < 0 {
		return router.Request{}, errMaxBurst
	}
	count, ok := parseCellInt(args[3])
	if !ok || count < 1 {
		return router.Request{}, errCount
	}
	period, ok := parseCellInt(args[4])
	if !ok || period < 1 {
		return router.Request{}, errCellPeriod
	}
	if burst == 1<<63-1 || period > (1<<63-1)/1_000_000 {
		return router.Request{}, errRange
	}
	quantity := int64(1)
	if len(args) == 6 {
		if quantity, ok = parseCellInt(args[5]); !ok || quantity < 0 {
			return router.Request{}, errQuantity
		}
	}
	return takeRequest(args[1], bucket.Limit{Capacity: burst + 1, Refill: count, Period: period * 1e6}, quantity)
}

// parseCellInt reads a number as redis-cell does (Rust's i64 parsing):
// parseInt's syntax, and also a leading '+', which clients written for
// redis-cell may send, and any number of leading zeros, where parseInt
// stops at 20 bytes.
func parseCellInt(b []byte) (int64, bool) {
	if len(b) > 1 && b[0] == '+' && b[1] != '-' {
		b = b[1:]
	}
	neg := len(b) > 1 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	for len(b) > 1 && b[0] == '0' && isDigit(b[1]) {
		b = b[1:]
	}
	if neg {
		// With its sign, as -2^63's magnitude is no int64.
		return parseInt(append([]byte{'-'}, b...))
	}
	return parseInt(b)
}

func takeRequest(key []byte, l bucket.Limit, cost int64) (router.Request, error) {
	if len(key) > maxKeyLen {
		return router.Request{}, errKeyLen
	}
	iv, err := l.Interval()
	if err != nil {
		return router.Request{}, errRange
	}
	r := router.KeyRequest(router.Take, key)
	r.Interval, r.Cost = iv, cost
	return r, nil
}

func parseReset(args [][]byte) (router.Request, error) {
	if len(args[1]) > maxKeyLen {
		return router.Request{}, errKeyLen
	}
	return router.KeyRequest(router.Reset, args[1]), nil
}

// replyThrottle writes [limited, capacity, remaining, retry_after_ms,
// reset_after_ms].
func replyThrottle(conn replyWriter, req *router.Request, res *router.Result) {
	writeDecision(conn, req, res, 1000)
}

// replyCellThrottle writes redis-cell's reply: the same, in seconds.
func replyCellThrottle(conn replyWriter, req *router.Request, res *router.Result) {
	writeDecision(conn, req, res, 1e6)
}

// replyWriter is the part of redcon.Conn (and of redcon.Writer) that
// bucket replies use.
type replyWriter interface {
	WriteArray(n int)
	WriteInt(n int)
	WriteInt64(n int64)
}

func writeDecision(conn replyWriter, req *router.Request, res *router.Result, unit int64) {
	conn.WriteArray(5)
	if res.Limited {
		conn.WriteInt(1)
	} else {
		conn.WriteInt(0)
	}
	conn.WriteInt64(req.Interval.Capacity)
	conn.WriteInt64(res.Remaining)
	if res.RetryAfter < 0 {
		conn.WriteInt(-1)
	} else {
		conn.WriteInt64(ceilDiv(res.RetryAfter, unit))
	}
	conn.WriteInt64(ceilDiv(res.ResetAfter, unit))
}

func replyReset(conn replyWriter, _ *router.Request, res *router.Result) {
	if res.Existed {
		conn.WriteInt(1)
	} else {
		conn.WriteInt(0)
	}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
