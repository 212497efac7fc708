package router

import (
	"net"
	"testing"
	"time"
)

// Once its node's answer is in, a blocking command no longer waits, even
// before its client has the answer: CLIENT UNBLOCK finds nothing to end
// (Redis answers 0 for a client a push served). A redirect's answer is
// not one: the command waits again elsewhere.
func TestReviewUnblockAfterTheAnswer(t *testing.T) {
	conn, peer := net.Pipe()
	defer conn.Close()
	defer peer.Close()
	var b Blocked
	if !b.use(conn, time.Second) {
		t.Fatal("use: cancelled")
	}
	b.wrote()
	b.release(false) // MOVED
	if !b.use(conn, time.Second) {
		t.Fatal("use after the move: cancelled")
	}
	b.wrote()
	b.release(true)
	if b.Unblock([]byte("*-1\r\n")) {
		t.Error("Unblock of a command its node answered: true")
	}
	var moved Blocked
	moved.use(conn, time.Second)
	moved.wrote()
	moved.release(false)
	if !moved.Unblock([]byte("*-1\r\n")) {
		t.Error("Unblock of a command between a MOVED and its next node: false")
	}
}
