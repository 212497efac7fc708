package proxy_test

import (
	"math"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// With --proto-max-bulk-len at its most (Redis's LONG_MAX), a bulk length
// within a few bytes of MaxInt64, less the body's own offset, passed the
// framer and reached redcon, which adds it to that offset: the sum
// wrapped negative and indexed out of range, a panic that took down the
// whole process from one client on the goroutine path. Such a length is
// refused as any other invalid one, and only that client is closed.
func TestBulkLengthNearMaxInt64OnBothPaths(t *testing.T) {
	eachIOConfig(t, proxy.Config{MaxBulkLen: math.MaxInt64, QueryBufferLimit: math.MaxInt64}, func(t *testing.T, cfg proxy.Config) {
		cfg.Decider = router.NewMemory(0)
		addr := serveConfig(t, cfg)
		for _, n := range []string{"9223372036854775805", "9223372036854775790", "4611686018427387904"} {
			c := dialRaw(t, addr)
			c.c.Write([]byte("*1\r\n$" + n + "\r\nab"))
			if got, want := c.endAndReadAll(), "-ERR Protocol error: invalid bulk length\r\n"; got != want {
				t.Errorf("$%s: %q, want %q", n, got, want)
			}
		}
		if got := dialRaw(t, addr).do("PING"); got != "+PONG\r\n" {
			t.Errorf("PING after: %q", got)
		}
	})
}
