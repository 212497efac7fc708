package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// A RESET makes a client of a password-protected server unauthenticated
// again, but what it asked while authenticated is still its own: a long
// reply pipelined before the RESET is written whole, however slowly the
// client reads it, as a pooled connection reset after a GET is answered
// by Redis. Only the replies made after the RESET count against the
// 16 KiB a client yet to authenticate may leave unread.
func TestResetKeepsRepliesMadeWhileAuthenticated(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: users(t, "", "secret")}, func(t *testing.T, cfg proxy.Config) {
		conn, err := net.Dial("tcp", serveConfig(t, cfg))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// More than the two sockets' buffers hold, so that the write
		// waits for the client.
		long := strings.Repeat("v", 8<<20)
		if _, err := fmt.Fprintf(conn, "AUTH secret\r\n*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\nRESET\r\nPING\r\n", len(long), long); err != nil {
			t.Fatal(err)
		}
		// A reader slower than the 10 ms a goroutine's write to a client
		// yet to authenticate may wait.
		time.Sleep(200 * time.Millisecond)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		want := fmt.Sprintf("+OK\r\n$%d\r\n%s\r\n+RESET\r\n-NOAUTH Authentication required.\r\n", len(long), long)
		got := make([]byte, len(want))
		n, err := io.ReadFull(conn, got)
		if err != nil || !bytes.Equal(got, []byte(want)) {
			t.Fatalf("got %d bytes (%.20q...%.40q), %v; want the %d of every reply", n, got[:min(n, 20)], got[max(0, n-40):n], err, len(want))
		}
	})
}
