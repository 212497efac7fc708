package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// gate is a Decider whose first call waits until it is opened; it records
// the size of every batch.
type gate struct {
	batchRecorder
	first atomic.Bool
	open  chan struct{}
	held  chan struct{} // closed when the first call is waiting
}

func (g *gate) Decide(ctx context.Context, reqs []router.Request, res []router.Result) {
	if g.first.CompareAndSwap(false, true) {
		close(g.held)
		<-g.open
	}
	g.batchRecorder.Decide(ctx, reqs, res)
}

// An event loop decides what all its ready clients sent in one batch: the
// requests that arrive while a round waits for the shards go out together
// in the next.
func TestClientsShareABatch(t *testing.T) {
	g := &gate{batchRecorder: batchRecorder{inner: router.NewMemory(0)}, open: make(chan struct{}), held: make(chan struct{})}
	addr := serveConfig(t, proxy.Config{Decider: g, Loops: 1})
	var firstR *bufio.Reader
	conns := make([]net.Conn, 6)
	for i := range conns {
		var r *bufio.Reader
		conns[i], r = raw(t, addr)
		// Answered: the loop watches its socket.
		io.WriteString(conns[i], "PING\r\n")
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			firstR = r
		}
	}
	const cmd = "THROTTLE k 9 1 1s\r\n"
	io.WriteString(conns[0], cmd)
	<-g.held
	for _, c := range conns[1:] {
		io.WriteString(c, cmd)
	}
	// The loop is blocked in the first round, so the others' requests wait
	// in their sockets: loopback delivers a write before it returns.
	close(g.open)
	if _, err := firstR.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the others are decided", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.batches) >= 2
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	if fmt.Sprint(g.batches) != "[1 5]" {
		t.Fatalf("batches %v, want [1 5]: the five clients that were ready together in one", g.batches)
	}
}

// A client that sends much and reads nothing fills its socket: the loop
// keeps its replies, stops reading from it, and goes on serving the others.
// Once it reads, it gets every reply in order.
func TestSlowReaderDoesNotStallOthers(t *testing.T) {
	addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: 1})
	slow, slowR := raw(t, addr)
	slow.SetDeadline(time.Now().Add(30 * time.Second))
	const n, size = 400, 100 << 10 // 40 MB of echoes, commands longer than one read
	wrote := make(chan error, 1)
	go func() {
		for i := range n {
			arg := fmt.Sprintf("%06d", i) + strings.Repeat("x", size-6)
			if _, err := fmt.Fprintf(slow, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", size, arg); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	other, otherR := raw(t, addr)
	for range 3 {
		io.WriteString(other, "PING\r\n")
		if line, err := otherR.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("another client: %q, %v", line, err)
		}
	}
	select {
	case err := <-wrote:
		t.Fatalf("all %d MB were taken without a reader (%v): the test did not fill the socket", n*size>>20, err)
	default:
	}
	for i := range n {
		header, err := slowR.ReadString('\n')
		if err != nil || header != fmt.Sprintf("$%d\r\n", size) {
			t.Fatalf("reply %d: header %.40q, %v", i, header, err)
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(slowR, body); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if got := string(body[:6]); got != fmt.Sprintf("%06d", i) {
			t.Fatalf("reply %d carries echo %s", i, got)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// waitUntil polls f every millisecond for up to five seconds.
func waitUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !f(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func TestInfoReportsLoops(t *testing.T) {
	for loops, want := range map[int]string{3: "io_loops:3\r\n", -1: "io_loops:0\r\n"} {
		c := newGoRedis(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops}))
		if text, err := c.Info(context.Background(), "server").Result(); err != nil || !strings.Contains(text, want) {
			t.Errorf("Loops %d: INFO server lacks %q: %q, %v", loops, want, text, err)
		}
	}
}
