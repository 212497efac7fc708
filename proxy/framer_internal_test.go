package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// A client that sends bytes that are not RESP and reads nothing is
// closed all the same: the protocol error is written if the socket takes
// it within a bound, and the read that met it fails, which closes the
// connection. A pipe takes nothing its other end does not read, as a full
// socket.
func TestProtocolErrorToAClientThatDoesNotRead(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	defer server.Close()
	c := &framedConn{Conn: server, f: framer{maxBulk: defaultMaxBulkLen, maxArgs: defaultMaxArgs, maxQuery: defaultQueryBufferLimit}}
	go client.Write([]byte("*1\r\n$x\r\n"))
	failed := make(chan error, 1)
	go func() {
		// The well-framed bytes before the error first, as redcon reads
		// them.
		var err error
		for err == nil {
			_, err = c.Read(make([]byte, 64))
		}
		failed <- err
	}()
	select {
	case err := <-failed:
		if !errors.Is(err, errProtocolClosed) {
			t.Errorf("read: %v, want a protocol error", err)
		}
	case <-time.After(lingerTime + 5*time.Second):
		t.Fatal("the protocol error's write still blocks the client's goroutine")
	}
}

// What a client sends after a RESET is framed once the RESET has run,
// which may leave it yet to authenticate, with Redis's tighter bounds:
// also when the RESET's last bytes come in the read that brings them, and
// its first came in one before, out of the framer's sight.
func TestFramedAfterAResetSplitAcrossReads(t *testing.T) {
	server, peer := net.Pipe()
	defer peer.Close()
	defer server.Close()
	cl := &client{user: &User{}}
	c := &framedConn{Conn: server, f: framer{maxBulk: defaultMaxBulkLen, maxArgs: defaultMaxArgs, maxQuery: defaultQueryBufferLimit}, cl: cl}
	go func() {
		peer.Write([]byte("*1\r\n$5\r\nRES"))
		peer.Write([]byte("ET\r\n*11\r\n"))
		io.Copy(io.Discard, peer) // the protocol error
	}()
	var got []byte
	p := make([]byte, 64)
	for !bytes.Contains(got, []byte("RESET\r\n")) {
		n, err := c.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p[:n]...)
	}
	if string(got) != "*1\r\n$5\r\nRESET\r\n" {
		t.Fatalf("handed on %q, framed past the RESET before it ran", got)
	}
	cl.user = nil // as the RESET, run, leaves a client of a server with a password
	if _, err := c.Read(p); !errors.Is(err, errUnauthMultibulk) {
		t.Fatalf("read after the RESET: %v, want %v", err, errUnauthMultibulk)
	}
}
