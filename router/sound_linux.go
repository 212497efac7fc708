package router

import (
	"crypto/tls"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// idleSound reports whether an idle connection to a node may be used
// again: nothing is readable on it. A node that closed it (its timeout, a
// restart, CLIENT KILL) made it readable (the end of the stream), and so
// would a reply nothing asked for; a command written on it would be
// answered its error, though it never ran. Nothing is read.
func idleSound(conn net.Conn) bool {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	sound := true
	raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		n, err := unix.Poll(fds, 0)
		sound = err == nil && n == 0
	})
	return sound
}
