package router

import (
	"net"
	"testing"
	"time"
)

// pollFor waits until f holds, failing t if it does not within d.
func pollFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveEach listens on loopback until the test ends, and hands each
// connection to handle on a goroutine of its own; it returns the address.
func serveEach(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(conn)
		}
	}()
	return ln.Addr().String()
}

// tunnelTo gives tun a connection to the node at addr, as a subscriber's
// command sent there would.
func tunnelTo(t *testing.T, tun *Tunnel, addr string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tun.mu.Lock()
	tun.conns.shards = append(tun.conns.shards, &tunnelConn{addr: addr, set: tun.conns, conn: conn})
	tun.mu.Unlock()
}
