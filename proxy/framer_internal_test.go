package proxy

import (
	"errors"
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
