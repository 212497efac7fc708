package proxy

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
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
		l.endRound()
	}
}

// BenchmarkLoopLongCommand is the loop reading a 1 MiB ECHO that arrives
// 4 KiB at a time from a real socket: linear in the command's length, not
// its square.
func BenchmarkLoopLongCommand(b *testing.B) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	const size = 1 << 20
	cmd := fmt.Appendf(nil, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", size, bytes.Repeat([]byte("x"), size))
	s := New(Config{Decider: allow{}})
	l := &loop{s: s, conns: map[uint64]*fdConn{}}
	c := &fdConn{fd: fds[1], id: 1, f: s.newFramer()}
	l.conns[c.id] = c
	b.SetBytes(int64(len(cmd)))
	b.ReportAllocs()
	for b.Loop() {
		for p := cmd; len(p) > 0; {
			n, err := syscall.Write(fds[0], p[:min(4<<10, len(p))])
			if err != nil {
				b.Fatal(err)
			}
			p = p[n:]
			l.read(c)
		}
		if len(c.pipe) != 1 || c.perr != "" {
			b.Fatalf("%d commands read (%s)", len(c.pipe), c.perr)
		}
		l.render(c)
		if len(l.out.b) != len(cmd)-len("*2\r\n$4\r\nECHO\r\n") {
			b.Fatalf("reply of %d bytes", len(l.out.b))
		}
		l.endRound()
	}
}
