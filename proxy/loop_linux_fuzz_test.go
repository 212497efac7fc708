//go:build linux

package proxy

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"unsafe"
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
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		whole := loopAnswers(t, stream, len(stream)+1)
		// At most about 2000 reads, so that long inputs stay quick.
		step := max(int(cut)%(24<<10)+1, len(stream)/2000)
		if got := loopAnswers(t, stream, step); !bytes.Equal(got, whole) {
			t.Fatalf("reads of %d bytes answered %.200q; one read answered %.200q", step, got, whole)
		}
	})
}

// loopAnswers sends stream to a loop's client through a real socket, step
// bytes at a time, and returns every reply the loop renders.
func loopAnswers(t *testing.T, stream []byte, step int) []byte {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	l, c := newTestLoop(t, allow{}, fds[1])
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
