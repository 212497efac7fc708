package proxy

import (
	"context"
	"testing"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
)

// allow is a Decider that allows everything, so that a benchmark measures
// the proxy alone.
type allow struct{}

func (allow) Decide(_ context.Context, _ []router.Request, res []router.Result) {
	for i := range res {
		res[i] = router.Result{Result: bucket.Result{Remaining: 99, RetryAfter: -1}}
	}
}

// BenchmarkLoopThrottle is an event loop's work for one THROTTLE between
// its read and its write: framing, splitting, parsing, batching, replying.
func BenchmarkLoopThrottle(b *testing.B) {
	s := New(Config{Decider: allow{}})
	l := &loop{s: s}
	c := &fdConn{f: s.newFramer()}
	raw := []byte("*6\r\n$8\r\nTHROTTLE\r\n$10\r\nuser:12345\r\n$3\r\n100\r\n$2\r\n10\r\n$2\r\n1s\r\n$1\r\n1\r\n")
	b.ReportAllocs()
	for b.Loop() {
		l.frame(c, raw, 0)
		l.b.decide(s.ctx, s.cfg.Decider)
		l.render(c)
		if len(l.out.b) == 0 || c.perr != "" {
			b.Fatalf("no reply (%s)", c.perr)
		}
		l.ready, l.argv = l.ready[:0], l.argv[:0]
		l.b.reset()
	}
}
