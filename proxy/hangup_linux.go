package proxy

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchHangUp calls gone, from a goroutine of its own, if conn's peer
// hangs up, or conn is closed, before stop is called: reset if it reset
// the connection or conn was closed, when it can take no answer, rather
// than ended its side. A goroutine client waiting for its
// blocking command's reply reads nothing meanwhile, so without it a client
// that went away would hold its node connection, and its place under
// --max-blocking, until the command returned: and a BLPOP 0 returns only
// by popping an element that no one receives. Nothing is read: what the
// client sent after the command stays for its turn, so the hang-up is
// seen by poll's POLLRDHUP, not by reading to the end of the stream (a
// TLS client's close_notify would be in the way).
//
// stop must be called before conn is read again; it leaves conn without a
// read deadline.
func watchHangUp(conn net.Conn, gone func(reset bool)) (stop func()) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	// A hang-up that came with the command is seen now, before the command
	// is sent, which then does not wait (router.Blocked), as Redis answers
	// what a client sent before its end; the goroutine would race the
	// command to its node.
	hungUp, reset := false, false
	raw.Control(func(fd uintptr) { hungUp, reset = hangUp(fd) })
	if hungUp {
		gone(reset)
		return func() {}
	}
	// The last read's deadline (--timeout) would end the watch once it
	// passed, with the command still waiting: a waiting client is not
	// idle. The next read sets its own.
	conn.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		hungUp, reset := false, false
		// Read calls the function again each time the runtime's poller
		// sees the socket readable, which a hang-up makes it; it ends when
		// the function says so or the read deadline passes (stop).
		err := raw.Read(func(fd uintptr) bool {
			hungUp, reset = hangUp(fd)
			return hungUp
		})
		switch {
		case hungUp:
			gone(reset)
		case errors.Is(err, net.ErrClosed):
			// Closed here during the wait (a subscriber's tunnel ended,
			// or it did not read its messages): no answer can reach it.
			gone(true)
		}
	}()
	return func() {
		conn.SetReadDeadline(time.Unix(1, 0))
		<-done
		conn.SetReadDeadline(time.Time{})
	}
}

// hangUp reports whether the peer of socket fd hung up, and whether it
// reset the connection: by the socket's state, not its error, which a
// write of the replies before the blocking command may have taken.
func hangUp(fd uintptr) (hungUp, reset bool) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(fds, 0)
	if err != nil || n == 0 || fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) == 0 {
		return false, false
	}
	info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	return true, err == nil && info.State == unix.BPF_TCP_CLOSE
}
