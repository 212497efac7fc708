//go:build !linux

package proxy

import "net"

// watchHangUp does not watch elsewhere: there, a goroutine client that
// hangs up during its blocking command is noticed once the command
// returns (the README says so).
func watchHangUp(net.Conn, func(reset bool)) (stop func()) { return func() {} }
