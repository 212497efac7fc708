package proxy

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
)

// GCRA key max_burst tokens_per_period period [TOKENS count] is Redis
// 8.8's rate limiter (gcraCommand in redis/redis src/gcra.c). Its
// arguments, checks, error messages and reply are Redis's; its bucket is
// sluice's, so that GCRA, THROTTLE and CL.THROTTLE on one key share one
// bucket.
//
// Redis keeps a TAT in µs and moves it by an emission interval
// E = (long long)(period*1e6/tokens_per_period + 0.5) µs, at least 1,
// computed in doubles; the bucket holds max_burst+1 tokens (max_burst*E of
// burst tolerance plus the request itself). That is sluice's bucket of
// capacity max_burst+1 refilled with one token every E µs, the interval
// {Capacity: max_burst+1, U: E, V: 1}, and from there both are exact
// integer arithmetic, so GCRA decides and answers as Redis does. E is
// computed with Redis's own float64 operations, so its rounding is
// Redis's: when period*10^6/tokens_per_period is a whole number of µs
// below 10^15 (60/10, 1/4, 1.5/3, 0.25/1), E is exactly that and GCRA is
// THROTTLE key max_burst+1 tokens_per_period period to the µs; otherwise
// (1/3) E is that quotient rounded to the nearest µs (ties up, never
// below 1 µs), as in Redis, not THROTTLE's exact fraction.

var (
	// Redis's messages, from getPositiveLongFromObjectOrReply,
	// getRangeLongFromObjectOrReply and getDoubleFromObjectOrReply.
	errPositive = errors.New("value is out of range, must be positive")
	errNotInt   = errors.New("value is not an integer or out of range")
	errFromOne  = errors.New("value is out of range, value must between 1 and 9223372036854775807")
	errNotFloat = errors.New("value is not a valid float")

	errGCRAPeriod = errors.New("period must be > 0 and < 1e12")
	errGCRASyntax = errors.New("syntax error")
	errGCRAMissed = errors.New("Missing TOKENS value")
	// These start with a capitalised word, so they carry their ERR: Redis
	// sends "-ERR GCRA limiting ...", not a "GCRA" error code.
	errGCRATokensOverflow = errors.New("ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow")
	errGCRABurstOverflow  = errors.New("ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and max_burst would cause an overflow")

	// sluice's own: Redis goes to 2^63 µs, sluice's exact arithmetic to
	// (max_burst+1) x E of at most 2^51 µs (71 years).
	errGCRARange = errors.New("max_burst, tokens_per_period and period out of range: the bucket cannot be computed exactly")
)

// parseGCRA checks in Redis's order, so that a line with several bad
// arguments gets Redis's error.
func parseGCRA(args [][]byte) (router.Request, error) {
	if len(args) > 7 {
		return router.Request{}, errors.New("wrong number of arguments for 'gcra' command")
	}
	burst, ok := parseRedisInt(args[2])
	if !ok || burst < 0 {
		return router.Request{}, errPositive
	}
	capacity := burst
	if burst < math.MaxInt64 {
		capacity++
	}
	rate, ok := parseRedisInt(args[3])
	if !ok {
		return router.Request{}, errNotInt
	}
	if rate < 1 {
		return router.Request{}, errFromOne
	}
	period, ok := parseRedisDouble(args[4])
	if !ok {
		return router.Request{}, errNotFloat
	}
	if period <= 0 || period >= 1e12 {
		return router.Request{}, errGCRAPeriod
	}
	count := int64(1)
	if len(args) >= 6 {
		if !isTokens(args[5]) {
			return router.Request{}, errGCRASyntax
		}
		if len(args) == 6 {
			return router.Request{}, errGCRAMissed
		}
		if count, ok = parseRedisInt(args[6]); !ok {
			return router.Request{}, errNotInt
		}
		if count < 1 {
			return router.Request{}, errFromOne
		}
	}
	e := emissionInterval(period, rate)
	if e > math.MaxInt64/count {
		return router.Request{}, errGCRATokensOverflow
	}
	if e > math.MaxInt64/capacity {
		return router.Request{}, errGCRABurstOverflow
	}
	// Redis also refuses a TAT past 2^63-1 µs: E*count after the later of
	// its clock and the stored TAT. Neither is known here, so sluice asks
	// its own clock. The answers can differ only for an E*count within the
	// clocks' skew plus the stored deficit of 2^63-1-now, which is 292,000
	// years of tokens.
	if e*count > math.MaxInt64-time.Now().UnixMicro() {
		return router.Request{}, errGCRATokensOverflow
	}
	iv, err := bucket.Limit{Capacity: capacity, Refill: 1, Period: e}.Interval()
	if err != nil {
		return router.Request{}, errGCRARange
	}
	if len(args[1]) > maxKeyLen {
		return router.Request{}, errKeyLen // after Redis's own checks, which come first
	}
	r := router.KeyRequest(router.Take, args[1])
	r.Interval, r.Cost = iv, count
	return r, nil
}

// emissionInterval is Redis's E in µs. The explicit conversions keep
// each operation rounded on its own, as C's doubles are: a fused
// multiply-add could move a tie.
func emissionInterval(period float64, tokens int64) int64 {
	us := float64(period * 1000000)
	e := int64(float64(us/float64(tokens)) + 0.5)
	return max(e, 1)
}

// replyGCRA writes Redis's GCRA reply: [limited, max_burst+1, remaining,
// retry_after_s, reset_after_s], the times in whole seconds rounded up and
// retry_after -1 when allowed or when count exceeds the bucket. It is
// CL.THROTTLE's, as Redis's GCRA follows redis-cell.
func replyGCRA(conn replyWriter, req *router.Request, res *router.Result) {
	writeDecision(conn, req, res, 1e6)
}

// isTokens is Redis's strcasecmp("tokens", arg): it compares C strings,
// so the argument ends at its first NUL byte.
func isTokens(b []byte) bool {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return equalFold(b, "tokens")
}

// parseRedisInt is Redis's string2ll: stricter than parseInt, it refuses
// leading zeros and "-0", which GCRA, HELLO, SELECT and a multibulk's
// headers must get Redis's error for.
func parseRedisInt(b []byte) (int64, bool) {
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || digits[0] < '1' || digits[0] > '9' {
		return 0, false
	}
	return parseInt(b)
}

// parseRedisDouble parses period as Redis 8.8's string2d does: its
// fast_float path (src/fast_float_strtod.c) and, for whatever that path
// does not take whole, glibc's strtod, under string2d's checks. So: an
// optional sign, then inf or infinity in any case, decimal digits with an
// optional point and exponent, or strtod's "0x" hexadecimal digits with an
// optional point and binary "p" exponent; no spaces, no underscores, NaN
// refused, and a value out of range refused (strtod's ERANGE with
// ±HUGE_VAL or 0), where a subnormal passes.
func parseRedisDouble(b []byte) (float64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	var v float64
	ok := true
	switch {
	case equalFold(b, "inf") || equalFold(b, "infinity"):
		v = math.Inf(1)
	case len(b) > 1 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X'):
		intPart, frac, exp, whole := scanFloat(b[2:], isHexDigit, 'p')
		if !whole {
			return 0, false
		}
		v, ok = hexValue(intPart, frac, exp)
	default:
		intPart, frac, exp, whole := scanFloat(b, isDigit, 'e')
		if !whole {
			return 0, false
		}
		v, ok = decimalValue(intPart, frac, exp)
	}
	if neg {
		v = -v
	}
	return v, ok
}

// scanFloat reads digits, an optional point and digits (at least one
// digit in all), and an optional exponent of decimal digits after expChar
// in either case; whole is whether that is all of b.
func scanFloat(b []byte, digit func(byte) bool, expChar byte) (intPart, frac []byte, exp int64, whole bool) {
	i := 0
	for i < len(b) && digit(b[i]) {
		i++
	}
	intPart = b[:i]
	if i < len(b) && b[i] == '.' {
		i++
		f := i
		for i < len(b) && digit(b[i]) {
			i++
		}
		frac = b[f:i]
	}
	if len(intPart)+len(frac) == 0 {
		return nil, nil, 0, false
	}
	if i < len(b) && b[i]|0x20 == expChar {
		i++
		eneg := false
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			eneg = b[i] == '-'
			i++
		}
		if i == len(b) {
			return nil, nil, 0, false
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
			if exp < 1<<40 {
				exp = exp*10 + int64(b[i]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	return intPart, frac, exp, i == len(b)
}

// decimalValue rounds 0.digits x 10^exp correctly, and is not ok out of
// range. It normalises the digits before strconv sees them, because
// strconv caps a long exponent before adding the point's position and
// strtod does not: only a normalised form reads the same in both.
func decimalValue(intPart, frac []byte, exp int64) (float64, bool) {
	digits, point := significant(intPart, frac)
	switch e := point + exp; {
	case len(digits) == 0:
		return 0, true
	case e < -330 || e > 310:
		return 0, false
	default:
		return inRange(strconv.ParseFloat("0."+string(digits)+"e"+strconv.FormatInt(e, 10), 64))
	}
}

// hexValue is decimalValue for strtod's hexadecimal form: 0x0.digits x
// 2^(exp + 4 x point).
func hexValue(intPart, frac []byte, exp int64) (float64, bool) {
	digits, point := significant(intPart, frac)
	switch e := exp + 4*point; {
	case len(digits) == 0:
		return 0, true
	case e < -1200 || e > 1100:
		return 0, false
	default:
		return inRange(strconv.ParseFloat("0x0."+string(digits)+"p"+strconv.FormatInt(e, 10), 64))
	}
}

// significant is the digits of intPart.frac without the zeros at either
// end, and where the point falls in them.
func significant(intPart, frac []byte) ([]byte, int64) {
	digits := append(append(make([]byte, 0, len(intPart)+len(frac)), intPart...), frac...)
	point := int64(len(intPart))
	for len(digits) > 0 && digits[0] == '0' {
		digits, point = digits[1:], point-1
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	return digits, point
}

// inRange reads a well-formed non-zero number: strtod's ERANGE is an
// infinity, or a 0 for digits that are not all zeros.
func inRange(v float64, err error) (float64, bool) {
	return v, err == nil && v != 0 && !math.IsInf(v, 0)
}

func isHexDigit(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
