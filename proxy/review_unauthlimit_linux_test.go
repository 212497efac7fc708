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

// Redis 7.0.15 closes a client yet to authenticate as soon as its replies
// pass its 16 KiB reply buffer: what overflows goes to a reply block of
// at least 16 KiB, which is counted whole against the 1 KiB allowed (a
// real redis-server --requirepass: 481 pipelined PINGs, 16,354 bytes of
// NOAUTH, are answered; 482, 16,388 bytes, close the client). On the
// event loops, where a pass's replies wait whole before the write as in
// Redis, sluice closes it at the same point.
func TestUnauthenticatedRepliesPastRedisBufferClose(t *testing.T) {
	addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: users(t, "", "secret"), Loops: 1})
	read := func(n int) (int, bool) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write(bytes.Repeat([]byte("PING\r\n"), n)); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		got, buf := 0, make([]byte, 1<<16)
		for {
			k, err := conn.Read(buf)
			got += k
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return got, false
			}
			if err != nil {
				return got, true
			}
		}
	}
	if got, closed := read(481); closed || got != 481*34 {
		t.Errorf("481 PINGs (%d bytes of NOAUTH): %d bytes, closed %v; Redis answers them all", 481*34, got, closed)
	}
	for _, n := range []int{482, 500, 512} {
		if got, closed := read(n); !closed {
			t.Errorf("%d PINGs (%d bytes of NOAUTH): %d bytes and still open; Redis closes the client", n, n*34, got)
		}
	}
}
