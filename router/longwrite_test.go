package router

import (
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// On the goroutine path, a node that takes a command of 32 MB at 16 MB/s,
// three times the forward timeout in all but never that long between
// parts, answers it: its read deadline moves on with each part written
// (writeLong), where it used to run from the first. (What the sockets'
// buffers hold after the last part, at most 4 MB here, takes the node a
// quarter of a second: inside the timeout.)
func TestBackendNodeTakingALongCommandIsNotHung(t *testing.T) {
	const size = 32 << 20
	cmd := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + strconv.Itoa(size) + "\r\n" + strings.Repeat("v", size) + "\r\n"
	addr := serveEach(t, func(conn net.Conn) {
		defer conn.Close()
		conn.(*net.TCPConn).SetReadBuffer(64 << 10)
		buf := make([]byte, 256<<10)
		for left := len(cmd); left > 0; {
			n, err := conn.Read(buf[:min(len(buf), left)])
			if err != nil {
				return
			}
			left -= n
			// A slow reader, 16 MB/s: the command takes about 2 s.
			time.Sleep(time.Duration(n) * 60 * time.Nanosecond)
		}
		conn.Write([]byte("+OK\r\n"))
		io.Copy(io.Discard, conn)
	})
	c := &Cluster{cfg: ClusterConfig{ForwardTimeout: 600 * time.Millisecond}, backends: map[string]*backend{}}
	var mu sync.Mutex
	var got []string
	f := answered(cmd, 1, &got)
	done := f.batch.done
	f.batch.done = func(idx []int) {
		mu.Lock()
		defer mu.Unlock()
		done(idx)
	}
	start := time.Now()
	c.backend(addr, false, false).send(f)
	pollFor(t, 10*time.Second, "the SET's answer", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	if got[0] != "+OK\r\n" {
		t.Fatalf("after %v the SET was answered %q", time.Since(start).Round(time.Millisecond), got[0])
	}
	if took := time.Since(start); took < 2*c.cfg.ForwardTimeout {
		t.Fatalf("the node took the command in %v: not slower than the timeout, nothing tested", took)
	}
}
