//go:build !linux

package proxy

import "net"

// Event loops use epoll; elsewhere every client has its own goroutine.

func defaultLoops() int { return -1 }

type loop struct{}

func (*loop) stop()    {}
func (*loop) drain()   {}
func (*loop) drained() {}

func loopable(net.Listener) bool { return false }

func (s *Server) startLoops() error { panic("unreachable") }

func (s *Server) acceptLoops(net.Listener) error { panic("unreachable") }

// fdConn is a loop's client; there are none here.
type fdConn struct{}

// tunnelCallbacks serve a loop's subscriber; there are none here.
func (*fdConn) tunnelCallbacks(int) (func([]byte, bool, bool), func(error)) { panic("unreachable") }

// written is how much of a loop's client's output was written; there are
// none here.
func (*fdConn) written() int { panic("unreachable") }
