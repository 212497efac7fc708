//go:build linux

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
	cmdspec "github.com/sluice-rl/sluice/router/command"
)

// allow is a Decider that allows everything, so that a benchmark measures
// the proxy alone.
type allow struct{}

func (allow) Submit(_ context.Context, _ []router.Request, res []router.Result, done func([]int)) {
	for i := range res {
		res[i] = router.Result{Result: bucket.Result{Remaining: 99, RetryAfter: -1}}
	}
	done(nil)
}

// newTestLoop is a loop that serves the socket fd as its one client,
// driven by the test's own calls instead of run.
func newTestLoop(tb testing.TB, d Decider, fd int) (*loop, *fdConn) {
	return newTestLoopOf(tb, Config{Decider: d}, fd)
}

// newTestLoopOf is newTestLoop for a server of cfg.
func newTestLoopOf(tb testing.TB, cfg Config, fd int) (*loop, *fdConn) {
	s := New(cfg)
	l, err := s.newLoop()
	if err != nil {
		tb.Fatal(err)
	}
	s.admit() // counted, as acceptLoops counts a client
	c := &fdConn{client: s.newClient("test", nil, fd), fd: fd, f: s.newFramer()}
	c.client.fd = c
	l.add(c)
	l.wakeUp()
	tb.Cleanup(func() {
		l.close(c)
		syscall.Close(l.wake)
		syscall.Close(l.epfd)
	})
	return l, c
}

// settle delivers what the loop's rounds decided and renders the replies,
// without writing them.
func (l *loop) settle() {
	l.submit()
	for _, d := range l.back {
		l.deliver(d)
	}
	l.back = l.back[:0]
	for _, c := range l.dirty {
		c.dirty = false
		l.s.drain(&c.client)
	}
	l.dirty = l.dirty[:0]
}

// BenchmarkLoopThrottle is an event loop's work for one THROTTLE between
// its read and its write: framing, splitting, parsing, batching, replying.
func BenchmarkLoopThrottle(b *testing.B) {
	l, c := newTestLoop(b, allow{}, -1)
	raw := []byte("*6\r\n$8\r\nTHROTTLE\r\n$10\r\nuser:12345\r\n$3\r\n100\r\n$2\r\n10\r\n$2\r\n1s\r\n$1\r\n1\r\n")
	b.ReportAllocs()
	for b.Loop() {
		l.mark(&c.client)
		l.frame(c, raw, 0)
		l.settle()
		if len(c.out.b) == 0 || c.closing {
			b.Fatalf("no reply: %q", c.out.b)
		}
		c.out.b = c.out.b[:0]
	}
}

// BenchmarkLoopThrottle16 is BenchmarkLoopThrottle for a pipeline of 16
// (redis-benchmark -P 16), read at once: the framer finds each command
// whole (framer.whole), and a round holds them all.
func BenchmarkLoopThrottle16(b *testing.B) {
	l, c := newTestLoop(b, allow{}, -1)
	raw := bytes.Repeat([]byte("*6\r\n$8\r\nTHROTTLE\r\n$10\r\nuser:12345\r\n$3\r\n100\r\n$2\r\n10\r\n$2\r\n1s\r\n$1\r\n1\r\n"), 16)
	benchPipeline(b, l, c, raw, []byte("*5\r\n"))
}

// benchPipeline has l take raw from c, read at once, and answer each of
// its 16 commands with a reply that begins with reply.
func benchPipeline(b *testing.B, l *loop, c *fdConn, raw, reply []byte) {
	b.ReportAllocs()
	for b.Loop() {
		l.mark(&c.client)
		l.frame(c, raw, 0)
		l.settle()
		if bytes.Count(c.out.b, reply) != 16 || c.closing {
			b.Fatalf("not 16 replies: %q", c.out.b)
		}
		c.out.b = c.out.b[:0]
	}
}

// longEcho is a loop serving one end of a socket pair, the other end
// (fds[0]) to write to, and an ECHO of 1 MiB to write.
func longEcho(tb testing.TB) (fds [2]int, cmd []byte, l *loop, c *fdConn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
	})
	const size = 1 << 20
	cmd = fmt.Appendf(nil, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", size, bytes.Repeat([]byte("x"), size))
	l, c = newTestLoop(tb, allow{}, fds[1])
	return fds, cmd, l, c
}

// BenchmarkLoopLongCommand is the loop reading a 1 MiB ECHO that arrives
// 4 KiB at a time from a real socket: linear in the command's length, not
// its square.
func BenchmarkLoopLongCommand(b *testing.B) {
	fds, cmd, l, c := longEcho(b)
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
		l.settle()
		if len(c.out.b) != len(cmd)-len("*2\r\n$4\r\nECHO\r\n") || c.closing {
			b.Fatalf("reply of %d bytes", len(c.out.b))
		}
		c.out.b = c.out.b[:0]
	}
}

// nilForwarder knows GET only, and answers each one a nil at once, so
// that a benchmark measures the proxy's part of a passthrough command.
type nilForwarder struct {
	Forwarder
	idx []int
}

var nilReply = []byte("$-1\r\n")

var getTable = map[string]*cmdspec.Spec{"get": {Name: "get", Arity: 2, Flags: []string{"readonly", "fast"},
	KeySpecs: []cmdspec.KeySpec{{Flags: []string{"RO", "access"}, BeginSearch: "index", Index: 1, FindKeys: "range", LastKey: 0, KeyStep: 1}}}}

func (*nilForwarder) Commands() map[string]*cmdspec.Spec { return getTable }

func (*nilForwarder) Route([]router.Forward) uint64 { return 1 }

func (f *nilForwarder) Forward(_ context.Context, _ router.Pipes, cmds []router.Forward, replies [][]byte, done func([]int)) {
	f.idx = f.idx[:0]
	for i := range cmds {
		replies[i] = nilReply
		f.idx = append(f.idx, i)
	}
	done(f.idx)
}

// BenchmarkLoopGet16 is BenchmarkLoopThrottle16 for a pipeline of 16 GETs
// (redis-benchmark -P 16 -t get), forwarded: an event loop's work for a
// passthrough command but the nodes' I/O.
func BenchmarkLoopGet16(b *testing.B) {
	l, c := newTestLoopOf(b, Config{Decider: allow{}, Forwarder: &nilForwarder{}}, -1)
	benchPipeline(b, l, c, bytes.Repeat([]byte("*2\r\n$3\r\nGET\r\n$16\r\nkey:000000012345\r\n"), 16), nilReply)
}
