package proxy_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// After CLIENT REPLY OFF, or a SKIP not yet spent on a command, Redis 7.0
// drops its protocol error too (no command's reply, but a reply all the
// same) and closes the connection; a SKIP spent on a command is not. On
// both serving paths, as redis-server 7.0.15 answers each of these
// (TestPathsAnswerAsRedis, PATHS_REDIS=1, seed 38).
func TestProtocolErrorAfterClientReplyOff(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		for _, c := range []struct{ name, send, want string }{
			{"off", "PING\r\nCLIENT REPLY OFF\r\nPING\r\n*1\r\n$x\r\n", "+PONG\r\n"},
			{"off, inline", "PING\r\nCLIENT REPLY OFF\r\nPING \"a\r\n", "+PONG\r\n"},
			{"skip", "PING\r\nCLIENT REPLY SKIP\r\n*1\r\n$x\r\n", "+PONG\r\n"},
			{"skip spent", "CLIENT REPLY SKIP\r\nPING\r\nPING\r\n*1\r\n$x\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
			{"on again", "CLIENT REPLY OFF\r\nCLIENT REPLY ON\r\n*1\r\n$x\r\n", "+OK\r\n-ERR Protocol error: invalid bulk length\r\n"},
		} {
			if got := exchangeToEnd(t, addr, c.send, false); got != c.want {
				t.Errorf("%s: got %q, want %q, then the end", c.name, got, c.want)
			}
		}
	})
}

// CLIENT REPLY SKIP while replies are off is nothing to Redis 7.0: a
// RESET after it, which turns them on, is answered (TestPathsAnswerAsRedis,
// PATHS_REDIS=1, seed 1297). Both serving paths.
func TestClientReplySkipWhileOff(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		for _, c := range []struct{ name, send, want string }{
			{"reset", "CLIENT REPLY OFF\r\nCLIENT REPLY SKIP\r\nRESET\r\nPING\r\nQUIT\r\n", "+RESET\r\n+PONG\r\n+OK\r\n"},
			{"skip alone", "CLIENT REPLY SKIP\r\nRESET\r\nPING\r\nQUIT\r\n", "+PONG\r\n+OK\r\n"},
		} {
			if got := exchangeToEnd(t, addr, c.send, false); got != c.want {
				t.Errorf("%s: got %q, want %q, then the end", c.name, got, c.want)
			}
		}
	})
}

// exchangeToEnd sends send to addr, at once or a byte a write, and reads
// what comes back until the server closes the connection (after a QUIT
// or a protocol error, which send must end with).
func exchangeToEnd(t *testing.T, addr, send string, bytewise bool) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	step := len(send)
	if bytewise {
		step = 1
	}
	for i := 0; i < len(send); i += step {
		if _, err := conn.Write([]byte(send[i:min(i+step, len(send))])); err != nil {
			t.Fatal(err)
		}
	}
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("%q: %v after %q", send, err, got)
	}
	return string(got)
}
