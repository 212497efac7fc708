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

// parseRedisDouble parses period as Redis 8 does (string2d over
// fast_float built with FASTFLOAT_ALLOWS_LEADING_PLUS): an optional sign,
// decimal digits with an optional point and exponent, or inf/infinity in
// any case after an optional "-" then "+"; no hex, no spaces, no
// underscores, and NaN refused. Out of range is not an error there: it is
// ±Inf or 0, for the period check to refuse.
func parseRedisDouble(b []byte) (float64, bool) {
	if v, ok := parseInf(b); ok {
		return v, true
	}
	i := 0
	neg := false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	start := i
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	intPart := b[start:i]
	var frac []byte
	if i < len(b) && b[i] == '.' {
		i++
		f := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		frac = b[f:i]
	}
	if len(intPart)+len(frac) == 0 {
		return 0, false
	}
	var exp int64
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := false
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			eneg = b[i] == '-'
			i++
		}
		if i == len(b) {
			return 0, false
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
	if i != len(b) {
		return 0, false
	}
	return decimalValue(neg, intPart, frac, exp), true
}

// decimalValue rounds ±0.digits x 10^exp correctly. It normalises the
// digits before strconv sees them, because strconv caps a long exponent
// before adding the point's position and fast_float does not: only a
// normalised form reads the same in both.
func decimalValue(neg bool, intPart, frac []byte, exp int64) float64 {
	digits := append(append(make([]byte, 0, len(intPart)+len(frac)), intPart...), frac...)
	point := int64(len(intPart))
	for len(digits) > 0 && digits[0] == '0' {
		digits, point = digits[1:], point-1
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	var v float64
	switch e := point + exp; {
	case len(digits) == 0 || e < -330:
		v = 0 // below half the least subnormal
	case e > 310:
		v = math.Inf(1)
	default:
		s := "0." + string(digits) + "e" + strconv.FormatInt(e, 10)
		v, _ = strconv.ParseFloat(s, 64) // well-formed; a range error is ±Inf or 0, wanted
	}
	if neg {
		v = -v
	}
	return v
}

// parseInf reads fast_float's infinities: "-"?, then "+"?, then "inf" or
// "infinity" in any case. "nan" parses there too, but Redis refuses it.
func parseInf(b []byte) (float64, bool) {
	sign := 1.0
	if len(b) > 0 && b[0] == '-' {
		sign, b = -1, b[1:]
	}
	if len(b) > 0 && b[0] == '+' {
		b = b[1:]
	}
	if equalFold(b, "inf") || equalFold(b, "infinity") {
		return math.Inf(int(sign)), true
	}
	return 0, false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
