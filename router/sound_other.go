//go:build !linux

package router

import "net"

// idleSound does not look elsewhere: there, a blocking command that meets
// an idle connection its node closed answers the connection's error.
func idleSound(net.Conn) bool { return true }
