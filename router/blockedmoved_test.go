package router

import (
	"io"
	"net"
	"testing"
	"time"
)

// A blocking command that follows a MOVED takes a new connection: a
// Cancel before it is written there leaves that connection alone (the
// command then runs without waiting, as one not sent yet), instead of
// shutting it under the command as the last connection, where it was
// written, would be; once written, a Cancel shuts it.
func TestBlockedCancelBeforeTheWriteAfterAMove(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (client, server net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		return c, s
	}
	// shut reports whether the peer of a connection saw its write side
	// end.
	shut := func(peer net.Conn) bool {
		peer.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := peer.Read(make([]byte, 1))
		return err == io.EOF
	}
	first, _ := pair()
	second, secondPeer := pair()
	var b Blocked
	if !b.use(first, time.Second) {
		t.Fatal("use: cancelled")
	}
	b.wrote()
	b.release(false) // MOVED: the command goes to another node
	if !b.use(second, time.Second) {
		t.Fatal("use after the move: cancelled")
	}
	b.Cancel()
	if shut(secondPeer) {
		t.Fatal("a Cancel before the command was written shut the new connection")
	}
	b.wrote()
	if !shut(secondPeer) {
		t.Error("a Cancel before the write did not take effect once written")
	}
}
