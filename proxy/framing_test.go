package proxy_test

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// eachLoops runs f with event loops and with a goroutine per client.
func eachLoops(t *testing.T, f func(t *testing.T, loops int)) {
	for _, loops := range []int{0, -1} {
		name := map[int]string{0: "loops", -1: "goroutines"}[loops]
		t.Run(name, func(t *testing.T) { f(t, loops) })
	}
}

// Redis's values pass: a 2 MB SET reaches the command table (the embedded
// backend has no SET) rather than a protocol error. THROTTLE keeps its own
// bound on keys.
func TestLongValuesPassTheFramer(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		conn, r := raw(t, serve(t, router.NewMemory(0)))
		long := strings.Repeat("v", 2<<20)
		go fmt.Fprintf(conn, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%s\r\nPING\r\n"+
			"*5\r\n$8\r\nTHROTTLE\r\n$%[1]d\r\n%[2]s\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n1\r\n", len(long), long)
		for _, want := range []string{
			"-ERR unknown command 'SET', with args beginning with: 'k' 'vvvv",
			"+PONG\r\n",
			"-ERR key must be at most 1 MiB\r\n",
		} {
			if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, want) {
				t.Fatalf("got %.80q, %v, want %q", line, err, want)
			}
		}
	})
}

// A command over Config.QueryBufferLimit closes its client, which is told
// why, and the log says so in Redis's words; one of the limit passes.
func TestQueryBufferLimit(t *testing.T) {
	eachLoops(t, func(t *testing.T, loops int) {
		core, logs := observer.New(zap.WarnLevel)
		const limit = 64 << 10
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops, QueryBufferLimit: limit, Logger: zap.New(core)})
		conn, r := raw(t, addr)
		// "*2\r\n$4\r\nECHO\r\n$65512\r\n" and the argument's CRLF are 24 bytes.
		echo := func(n int) string {
			return fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", n, strings.Repeat("e", n))
		}
		if len(echo(limit-24)) != limit {
			t.Fatalf("the command is %d bytes", len(echo(limit-24)))
		}
		go io.WriteString(conn, echo(limit-24)+echo(limit-23))
		if line, err := r.ReadString('\n'); err != nil || line != fmt.Sprintf("$%d\r\n", limit-24) {
			t.Fatalf("a command of the limit: %q, %v", line, err)
		}
		r.Discard(limit - 24 + 2)
		rest, err := io.ReadAll(r)
		if want := "-ERR Protocol error: reached max query buffer length\r\n"; string(rest) != want || err != nil {
			t.Fatalf("a command a byte over the limit: %q, %v, want %q and EOF", rest, err, want)
		}
		conn.Close()
		waitUntil(t, "the warning is logged", func() bool {
			return logs.FilterMessage("closing client that reached max query buffer length").Len() == 1
		})
	})
}

// "*0" and "*-1" are ignored, as Redis ignores them: no reply, and the
// connection goes on.
func TestEmptyMultibulkIsIgnored(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		conn, r := raw(t, serve(t, router.NewMemory(0)))
		for _, send := range []string{"*0\r\n*-1\r\nPING\r\n", "*", "-1\r", "\n", "*0\r\n", "PING\r\n"} {
			io.WriteString(conn, send)
			time.Sleep(time.Millisecond) // separate reads, most likely
		}
		for range 2 {
			if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
				t.Fatalf("got %q, %v, want +PONG", line, err)
			}
		}
		io.WriteString(conn, "ECHO x\r\n")
		if line, err := r.ReadString('\n'); err != nil || line != "$1\r\n" {
			t.Fatalf("after the empty commands: %q, %v", line, err)
		}
	})
}

// After QUIT or a protocol error, the replies before it reach a client
// that is still sending, followed by EOF: not a TCP reset, which a close
// with input unread would send, and which can drop the replies. A client
// that never stops sending is closed after lingerTime.
func TestRepliesBeforeACloseAreNotReset(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		flood := strings.Repeat("PING\r\n", 1<<16)

		// The client that never stops sending lingers while the others
		// are tried, rather than adding lingerTime to them.
		conn, r := raw(t, addr)
		io.WriteString(conn, "QUIT\r\n")
		if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
			t.Fatalf("QUIT: %q, %v", line, err)
		}
		lingered := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			for {
				if _, err := io.WriteString(conn, flood); err != nil {
					break
				}
			}
			lingered <- time.Since(start)
		}()

		for _, tt := range []struct{ name, send, want string }{
			{"QUIT", "PING\r\nQUIT\r\nPING\r\n", "+PONG\r\n+OK\r\n"},
			{"protocol error", "PING\r\n*1\r\n$-7\r\nPING\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
		} {
			for i := range 20 {
				conn, _ := raw(t, addr)
				wrote := make(chan struct{})
				go func() {
					defer close(wrote)
					io.WriteString(conn, tt.send+flood)
				}()
				got, err := io.ReadAll(conn)
				conn.Close()
				<-wrote
				if string(got) != tt.want || err != nil {
					t.Fatalf("%s, try %d: got %q, %v; want %q and EOF", tt.name, i, got, err, tt.want)
				}
			}
		}

		if took := <-lingered; took > 3*time.Second {
			t.Fatalf("a client sending after QUIT was read for %v", took)
		}
	})
}

// A client that announces a 500 MB argument costs what it sent, not what
// it announced, on both paths; one that sends more of it costs about what
// it sent.
func TestAnnouncedLengthIsNotAllocated(t *testing.T) {
	eachLoops(t, func(t *testing.T, loops int) {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops})
		const clients, more = 4, 4 << 20
		before := heapInUse()
		conns := make([]net.Conn, clients)
		for i := range conns {
			conns[i], _ = raw(t, addr)
			io.WriteString(conns[i], "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$500000000\r\n0123456789")
		}
		waitRead(t, conns...)
		announced := heapInUse() - before
		chunk := strings.Repeat("x", more)
		for _, c := range conns {
			if _, err := io.WriteString(c, chunk); err != nil {
				t.Fatal(err)
			}
		}
		// Read once it shows: a quarter of what was sent is held (the rest
		// may still sit in the sockets).
		var sent int64
		waitUntil(t, "the server reads what was sent", func() bool {
			sent = heapInUse() - before
			return sent >= clients*more/4
		})
		t.Logf("%d clients announcing 500 MB: heap grew %d KiB with 10 bytes each sent, %d KiB with 4 MiB more each",
			clients, announced>>10, sent>>10)
		if announced > 4<<20 {
			t.Errorf("heap grew %d MiB for %d clients that sent 10 bytes of a 500 MB argument", announced>>20, clients)
		}
		if sent > 4*clients*more {
			t.Errorf("heap grew %d MiB for %d clients that sent %d MiB each", sent>>20, clients, more>>20)
		}
	})
}

func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// A client that announces two billion arguments and sends a few MB of
// them is read as fast as it sends, on both paths: redcon parses what it
// holds of an unfinished command again at every read, counting to the
// announced number each time, which once kept a goroutine's client
// unread for seconds per read. A command of many arguments that ends is
// answered.
func TestAnnouncedArgumentsAreNotCounted(t *testing.T) {
	eachLoops(t, func(t *testing.T, loops int) {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops})
		conn, _ := raw(t, addr)
		b := []byte("*2147483647\r\n" + strings.Repeat("$1\r\na\r\n", 4<<20/7))
		// 4 MB is past what the sockets hold: the write ends once the
		// server read most of it. Generous for a loaded machine; it took
		// over 3 s on the goroutine path before.
		conn.SetWriteDeadline(time.Now().Add(3 * time.Second))
		start := time.Now()
		if _, err := conn.Write(b); err != nil {
			t.Fatalf("4 MB of a command's arguments not read after %v: %v", time.Since(start), err)
		}
		many, r := raw(t, addr)
		const n = 100_000
		go io.WriteString(many, fmt.Sprintf("*%d\r\n$4\r\nECHO\r\n%sPING\r\n", n, strings.Repeat("$1\r\na\r\n", n-1)))
		for _, want := range []string{"-ERR wrong number of arguments for 'echo' command\r\n", "+PONG\r\n"} {
			if got, err := r.ReadString('\n'); got != want {
				t.Fatalf("ECHO of %d arguments, then PING: %q, %v; want %q", n, got, err, want)
			}
		}
	})
}
