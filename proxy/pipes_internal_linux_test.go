package proxy

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluice-rl/sluice/router"
)

// A node's socket dialled after the loop's last wake-up is closed when the
// loop ends (a drained loop ends without another wake-up).
func TestLoopShutdownClosesSocketsDialledMeanwhile(t *testing.T) {
	s := New(Config{Decider: router.NewMemory(0)})
	l, err := s.newLoop()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.dialed = append(l.dialed, dialed{n: &node{fd: -1}, fd: fd})
	l.mu.Unlock()
	l.shutdown()
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		syscall.Close(fd)
		t.Fatalf("the dialled socket is still open after the loop's shutdown (fcntl: %v)", err)
	}
}
