package proxy

import (
	"errors"
	"math"
	"testing"
)

// --proto-max-bulk-len takes any size up to Redis's LONG_MAX; a header of
// that length, or one less, must not overflow the body's count (with its
// CRLF) into a negative index: that panicked the loop, and with it every
// client. Redis aborts on the allocation; an error that closes the one
// client is what its smaller sizes get.
func TestBulkLengthNearMaxInt64(t *testing.T) {
	for _, n := range []string{"9223372036854775807", "9223372036854775806"} {
		f := framer{maxBulk: math.MaxInt64, maxArgs: defaultMaxArgs, maxQuery: math.MaxInt64}
		_, err := f.scan([]byte("*1\r\n$" + n + "\r\nx\r\n"))
		if !errors.Is(err, errBulkLength) {
			t.Errorf("$%s: %v, want %v", n, err, errBulkLength)
		}
	}
}
