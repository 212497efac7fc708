package proxy

import (
	"crypto/tls"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchHangUp calls gone, from a goroutine of its own, if conn's peer
// hangs up before stop is called. A goroutine client waiting for its
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
func watchHangUp(conn net.Conn, gone func()) (stop func()) {
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
	hungUp := false
	raw.Control(func(fd uintptr) { hungUp = hangUp(fd) })
	if hungUp {
		gone()
		return func() {}
	}
	// The last read's deadline (--timeout) would end the watch once it
	// passed, with the command still waiting: a waiting client is not
	// idle. The next read sets its own.
	conn.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		hungUp := false
		// Read calls the function again each time the runtime's poller
		// sees the socket readable, which a hang-up makes it; it ends when
		// the function says so or the read deadline passes (stop).
		raw.Read(func(fd uintptr) bool {
			hungUp = hangUp(fd)
			return hungUp
		})
		if hungUp {
			gone()
		}
	}()
	return func() {
		conn.SetReadDeadline(time.Unix(1, 0))
		<-done
		conn.SetReadDeadline(time.Time{})
	}
}

// hangUp reports whether the peer of socket fd hung up.
func hangUp(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
}
