package proxy

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
)

// A long argument's buffer grows with what arrives, and no further than
// the argument needs: doubling past the end of a 1 MiB value would hold,
// and clear, another MiB that nothing fills.
func TestLongArgumentBufferStopsAtItsEnd(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	const size = 1 << 20
	cmd := fmt.Appendf(nil, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", size, bytes.Repeat([]byte("x"), size))
	l, c := newTestLoop(t, allow{}, fds[1])
	most := 0
	for p := cmd[:len(cmd)-10]; len(p) > 0; {
		n, err := syscall.Write(fds[0], p[:min(4<<10, len(p))])
		if err != nil {
			t.Fatal(err)
		}
		p = p[n:]
		l.read(c)
		most = max(most, cap(c.pend))
	}
	if len(c.pend) != len(cmd)-10 {
		t.Fatalf("%d bytes held, want the %d sent", len(c.pend), len(cmd)-10)
	}
	if most > len(cmd)+2*readSize {
		t.Errorf("the buffer grew to %d bytes for a command of %d", most, len(cmd))
	}
	syscall.Write(fds[0], cmd[len(cmd)-10:])
	l.read(c)
	l.settle()
	if len(c.out.b) != len(cmd)-len("*2\r\n$4\r\nECHO\r\n") || c.closing {
		t.Fatalf("reply of %d bytes", len(c.out.b))
	}
}
