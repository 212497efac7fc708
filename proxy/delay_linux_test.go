//go:build linux

package proxy

import (
	"syscall"
	"testing"
)

// delayedLoop is a loop whose one client, on a socket pair, has sent three
// THROTTLEs that the held Decider keeps; peer is the client's end.
func delayedLoop(t *testing.T) (l *loop, h *held, peer int) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fds[0]) })
	h = &held{}
	l, c := newTestLoop(t, h, fds[1])
	l.frame(c, []byte("THROTTLE a 9 1 1s 1\r\nTHROTTLE b 9 1 1s 2\r\nTHROTTLE c 9 1 1s 3\r\n"), 0)
	l.submit()
	return l, h, fds[0]
}

const delayedReplies = "*5\r\n:0\r\n:9\r\n:1\r\n:-1\r\n:0\r\n*5\r\n:0\r\n:9\r\n:2\r\n:-1\r\n:0\r\n*5\r\n:0\r\n:9\r\n:3\r\n:-1\r\n:0\r\n"

// A pipeline whose decisions come back one pass after another (three
// shards answering in turn) is answered in one write, once the last is in.
func TestPipelineAnsweredInOneWrite(t *testing.T) {
	l, h, peer := delayedLoop(t)
	for range 2 {
		h.report(0, 1)
		l.wakeUp()
		l.endRound()
		if n := unread(t, peer); n != 0 {
			t.Fatalf("%d bytes written while the pipeline's last decisions were out", n)
		}
	}
	h.report(0, 1)
	l.wakeUp()
	l.endRound()
	buf := make([]byte, 1024)
	n, err := syscall.Read(peer, buf)
	if err != nil || string(buf[:n]) != delayedReplies {
		t.Fatalf("one read got %q, %v; want %q", buf[:max(n, 0)], err, delayedReplies)
	}
}

// A reply is delayed for maxDelays passes at most, however long the rest
// of its pipeline takes; and at once when the loop would sleep.
func TestDelayedReplyIsBounded(t *testing.T) {
	for _, idle := range []bool{false, true} {
		l, h, peer := delayedLoop(t)
		h.report(0, 1)
		l.wakeUp()
		passes := 0
		for unread(t, peer) == 0 && passes <= maxDelays {
			l.flushAll = idle // as run sets it when nothing came
			l.endRound()
			passes++
		}
		want := maxDelays + 1
		if idle {
			want = 1
		}
		if passes != want {
			t.Fatalf("idle %v: the first reply was written after %d passes, want %d", idle, passes, want)
		}
		buf := make([]byte, 1024)
		if n, err := syscall.Read(peer, buf); err != nil || string(buf[:n]) != delayedReplies[:len(delayedReplies)/3] {
			t.Fatalf("idle %v: read %q, %v", idle, buf[:max(n, 0)], err)
		}
	}
}
