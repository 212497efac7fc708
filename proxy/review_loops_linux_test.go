package proxy

import (
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// A loop that cannot be made (no descriptor left for its epoll or
// eventfd) fails Serve with the error, as Redis fails to start: the loops
// made before it, not running yet, are let go, not waited for.
func TestStartLoopsFailsWithoutHanging(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	probe, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(probe)
	low := lim
	low.Cur = uint64(probe) + 256
	if low.Cur >= lim.Cur {
		t.Skip("the descriptor limit is already low")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var fill []int
	defer func() {
		for _, fd := range fill {
			syscall.Close(fd)
		}
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}()
	for len(fill) < int(low.Cur) {
		fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		fill = append(fill, fd)
	}
	// Room for the first loop's epoll and eventfd, none for the second's.
	for range 2 {
		syscall.Close(fill[len(fill)-1])
		fill = fill[:len(fill)-1]
	}
	s := New(Config{Decider: router.NewMemory(0), Loops: 2})
	started := make(chan error, 1)
	go func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		started <- s.startLoops()
	}()
	select {
	case err := <-started:
		if err == nil {
			t.Fatal("two loops started with descriptors for one")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("startLoops still waits for the loop it made before the one it could not make")
	}
	// The first loop's descriptors are closed: two can be opened again.
	for range 2 {
		fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("the loop made first kept its descriptors: %v", err)
		}
		fill = append(fill, fd)
	}
}
