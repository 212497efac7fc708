package proxy

import (
	"syscall"
	"testing"
)

// A long argument's buffer grows with what arrives, and no further than
// the argument needs: doubling past the end of a 1 MiB value would hold,
// and clear, another MiB that nothing fills.
func TestLongArgumentBufferStopsAtItsEnd(t *testing.T) {
	fds, cmd, l, c := longEcho(t)
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
