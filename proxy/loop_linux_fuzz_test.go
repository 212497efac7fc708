//go:build linux

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
)

// FuzzLoopRead checks that how a client's bytes are cut into reads does not
// change what an event loop answers: partial commands, long commands read
// into the client's own buffer, protocol errors, QUIT.
func FuzzLoopRead(f *testing.F) {
	f.Add([]byte("PING\r\n*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\nTHROTTLE k 5 1 1s\r\n"), uint16(3))
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$40000\r\n"+strings.Repeat("y", 40000)+"\r\nPING\r\n"), uint16(5000))
	f.Add([]byte("*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPINGxx"), uint16(2))
	f.Add([]byte("PING\r\nQUIT\r\nPING\r\n"), uint16(7))
	f.Add([]byte("ECHO \"a b\r\n\r\n  \r\n*1\r\n$-2\r\n"), uint16(1))
	f.Add([]byte("*0\r\n*-1\r\nPING\r\nECHO \"a b\" 'c'\r\n*1\r\n$4\r\nPING\r\n"), uint16(2))
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		whole := loopAnswers(t, stream, len(stream)+1, nil)
		// At most about 2000 reads, so that long inputs stay quick.
		step := max(int(cut)%(24<<10)+1, len(stream)/2000)
		if got := loopAnswers(t, stream, step, nil); !bytes.Equal(got, whole) {
			t.Fatalf("reads of %d bytes answered %.200q; one read answered %.200q", step, got, whole)
		}
	})
}

// loopAnswers sends stream to a loop's client through a real socket, step
// bytes at a time, and returns every reply the loop renders. f, if not
// nil, frames it in place of the server's framer.
func loopAnswers(t *testing.T, stream []byte, step int, f *framer) []byte {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	l, c := newTestLoop(t, allow{}, fds[1])
	if f != nil {
		c.f = *f
	}
	var out []byte
	for p := stream; len(p) > 0 && !c.closing; {
		n, err := syscall.Write(fds[0], p[:min(step, len(p))])
		if err != nil {
			t.Fatal(err)
		}
		p = p[n:]
		for unread(t, c.fd) > 0 && !c.closing {
			l.read(c)
			l.settle()
			out = append(out, c.out.b...)
			c.out.b = c.out.b[:0]
			// A pass stopped at passParts: as the loop, take the rest in
			// the passes after it before reading more.
			for c.backlog {
				l.takeBacklog()
				l.settle()
				out = append(out, c.out.b...)
				c.out.b = c.out.b[:0]
			}
		}
	}
	return out
}

// unread is how many bytes wait in the socket fd.
func unread(t *testing.T, fd int) int {
	var n int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatal(errno)
	}
	return int(n)
}

// held is a Decider that keeps every round until the test reports its
// results, in whatever order and groups it likes. A THROTTLE's result
// carries its cost back as its remaining tokens, so that each reply can be
// told from the others.
type held struct {
	rounds []*heldRound
}

type heldRound struct {
	reqs []router.Request
	res  []router.Result
	done func([]int)
	left []int
}

func (h *held) Submit(_ context.Context, reqs []router.Request, res []router.Result, done func([]int)) {
	r := &heldRound{reqs: reqs, res: res, done: done}
	for i := range reqs {
		r.left = append(r.left, i)
	}
	h.rounds = append(h.rounds, r)
}

// report reports some of round k's results: the first n left, or all.
func (h *held) report(k, n int) {
	r := h.rounds[k]
	n = min(max(n, 1), len(r.left))
	idx := slices.Clone(r.left[:n])
	r.left = r.left[n:]
	for _, i := range idx {
		r.res[i] = router.Result{Result: bucket.Result{Remaining: r.reqs[i].Cost, RetryAfter: -1}}
	}
	if len(r.left) == 0 {
		h.rounds = slices.Delete(h.rounds, k, k+1)
	}
	r.done(idx)
}

// FuzzCompletions checks that however decisions come back (any round, any
// subset, any order, interleaved with more commands, drains and a close),
// a client's replies are its commands' replies in its order, and nothing
// breaks once it is closed.
func FuzzCompletions(f *testing.F) {
	f.Add([]byte{0, 1, 0, 4, 1, 2, 6, 3, 0, 1, 2, 3})
	f.Add([]byte{0, 0, 5, 0, 1, 9, 10, 14, 3, 255, 2, 3})
	f.Add([]byte{4, 0, 1, 8, 1, 0, 1, 2, 2, 2, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		h := &held{}
		l, c := newTestLoop(t, h, -1)
		var want, got []byte
		cost := int64(0)
		closed := false
		for _, op := range ops {
			switch {
			case op == 255:
				c.gone, closed = true, true
			case op%4 == 0 && !closed:
				// A command: THROTTLE, PING or ECHO.
				var raw string
				switch (op / 4) % 3 {
				case 0:
					cost++
					raw = fmt.Sprintf("THROTTLE k%d 1000 1 1s %d\r\n", op%3, cost)
					want = fmt.Appendf(want, "*5\r\n:0\r\n:1000\r\n:%d\r\n:-1\r\n:0\r\n", cost)
				case 1:
					raw = "PING\r\n"
					want = append(want, "+PONG\r\n"...)
				default:
					raw = fmt.Sprintf("ECHO e%d\r\n", op)
					want = fmt.Appendf(want, "$%d\r\ne%d\r\n", len(fmt.Sprint(op))+1, op)
				}
				l.take(c, []byte(raw), false)
			case op%4 == 1:
				l.submit()
			case op%4 == 2 && len(h.rounds) > 0:
				// Some results of some round, taken as the loop takes them.
				h.report(int(op/4)%len(h.rounds), int(op/16))
				l.wakeUp()
			default:
				l.settle()
				got = append(got, c.out.b...)
				c.out.b = c.out.b[:0]
			}
		}
		l.submit()
		for len(h.rounds) > 0 {
			h.report(0, len(h.rounds[0].left))
		}
		l.wakeUp()
		l.settle()
		got = append(got, c.out.b...)
		if !bytes.HasPrefix(want, got) || (!closed && !bytes.Equal(got, want)) {
			t.Fatalf("replies\n%q\nwant\n%q", got, want)
		}
	})
}
