package proxy_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// A client yet to authenticate that sends commands and reads none of the
// NOAUTH replies is closed once over 16 KiB of them wait beyond what its
// socket took, as Redis 7.0.15 closes it (CVE-2025-21605), not held open
// for good with its replies, as any other client is held (it is not read
// meanwhile).
func TestUnauthenticatedClientThatDoesNotReadIsClosed(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: users(t, "", "secret")}, func(t *testing.T, cfg proxy.Config) {
		conn, err := net.Dial("tcp", serveConfig(t, cfg))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Far more replies than the two sockets' buffers hold.
		flood := bytes.Repeat([]byte("PING\r\n"), 1<<20)
		wrote := make(chan error, 1)
		go func() {
			conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
			_, err := conn.Write(flood)
			wrote <- err
		}()
		select {
		case err := <-wrote:
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("sluice stopped reading the client and never closed it")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the write neither ended nor timed out")
		}
		// What sluice sent before it closed: NOAUTH replies, then the end.
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var got []byte
		buf := make([]byte, 1<<16)
		for {
			n, err := conn.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("the connection is still open after %d bytes of replies", len(got))
				}
				break
			}
		}
		if !bytes.HasPrefix(got, []byte("-NOAUTH Authentication required.\r\n")) && len(got) > 0 {
			t.Errorf("replies before the close: %.80q", got)
		}
	})
}
