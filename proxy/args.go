package proxy

import "errors"

// parseInt parses a decimal int64: an optional '-', digits, nothing
// else, no overflow. Unlike Redis (parseRedisInt, for the commands that
// must answer as Redis does) it takes leading zeros and "-0".
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<63-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// maxKeyLen bounds a bucket's key. The framing lets an ordinary command
// carry Redis's 512 MiB arguments; a bucket's name is sluice's to keep and
// to send with every decision, and never needs that.
const maxKeyLen = 1 << 20

var (
	errKeyLen      = errors.New("key must be at most 1 MiB")
	errPeriod      = errors.New("period must be a positive duration like 60, 500ms or 1h")
	errPeriodShort = errors.New("period must be at least 1ms")
	errPeriodFine  = errors.New("period must be a whole number of microseconds")
	errPeriodLong  = errors.New("period is too long to count in microseconds")
)

// periodUnits are the duration suffixes THROTTLE accepts, in µs.
var periodUnits = [...]struct {
	suffix string
	us     int64
}{
	{"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}, {"d", 86400e6},
}

// parsePeriod parses a THROTTLE period into µs: digits with an optional
// decimal part and an optional unit (ms, s, m, h, d; none means seconds).
// It rejects what cannot be expressed in whole µs, and periods under 1 ms.
func parsePeriod(b []byte) (int64, error) {
	unit := int64(1e6)
	for _, u := range periodUnits {
		n := len(u.suffix)
		if len(b) > n && equalFold(b[len(b)-n:], u.suffix) && (n == 2 || !isLetter(b[len(b)-2])) {
			unit, b = u.us, b[:len(b)-n]
			break
		}
	}
	whole, frac := b, []byte(nil)
	for i, c := range b {
		if c == '.' {
			whole, frac = b[:i], b[i+1:]
			if len(frac) == 0 {
				return 0, errPeriod
			}
			break
		}
	}
	if len(whole) == 0 || len(frac) > 18 {
		return 0, errPeriod
	}
	if len(whole) > 18 {
		if _, ok := parseDigits(whole); ok {
			return 0, errPeriodLong
		}
		return 0, errPeriod
	}
	w, ok := parseDigits(whole)
	if !ok {
		return 0, errPeriod
	}
	if w > (1<<63-1)/unit {
		return 0, errPeriodLong
	}
	us := w * unit
	if len(frac) > 0 {
		f, ok := parseDigits(frac)
		if !ok {
			return 0, errPeriod
		}
		// f/10^len(frac) of a unit must be whole µs: reduce the fraction by
		// the unit's factors of ten first so that nothing overflows.
		u, scale := unit, len(frac)
		for scale > 0 && u%10 == 0 {
			u, scale = u/10, scale-1
		}
		for ; scale > 0; scale-- {
			if f%10 != 0 {
				return 0, errPeriodFine
			}
			f /= 10
		}
		if f > (1<<63-1-us)/u {
			return 0, errPeriodLong
		}
		us += f * u
	}
	if us < 1000 {
		if us == 0 {
			return 0, errPeriod
		}
		return 0, errPeriodShort
	}
	return us, nil
}

// parseDigits parses ASCII digits into n: at most 18 of them, so no
// overflow, unless the caller wants ok alone.
func parseDigits(b []byte) (int64, bool) {
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// equalFold compares b to s, of lower-case ASCII letters only, ignoring
// b's case (for another byte in s, c|0x20 would match more than it).
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != s[i] {
			return false
		}
	}
	return true
}
