package proxy

import (
	"syscall"
	"unsafe"
)

// The loop's reads and writes are on non-blocking sockets, and pollNow
// does not wait: none of them can block, so they skip the scheduler's
// syscall bookkeeping (entersyscall/exitsyscall, and the P that sysmon
// would hand off from under a syscall it thinks blocked). pollWait does
// block, on purpose: see its comment.

func rawRead(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

func rawWrite(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// pollNow is epoll_wait that returns at once.
func pollNow(epfd int, events []syscall.EpollEvent) (int, error) {
	return pollWait(epfd, events, 0)
}

// pollWait is epoll_wait for up to ms (-1: until an event), which blocks
// its thread and its P: only for a goroutine that leaves other Ps to the
// rest (see loop.run).
func pollWait(epfd int, events []syscall.EpollEvent, ms int) (int, error) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(ms), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// yield gives the thread's CPU to any other thread that may run on it.
func yield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
