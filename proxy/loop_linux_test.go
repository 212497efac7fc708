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

// gate is a Decider whose first calls wait, each until it is let through;
// it records the size of every batch.
type gate struct {
	batchRecorder
	hold  int64 // how many first calls wait
	calls atomic.Int64
	held  chan struct{} // a call is waiting
	open  chan struct{} // lets one through
}

func newGate(hold int64) *gate {
	g := &gate{batchRecorder: batchRecorder{inner: router.NewMemory(0)}, hold: hold, held: make(chan struct{}), open: make(chan struct{})}
	return g
}

func (g *gate) Decide(ctx context.Context, reqs []router.Request, res []router.Result) {
	if g.calls.Add(1) <= g.hold {
		g.held <- struct{}{}
		<-g.open
	}
	g.batchRecorder.Decide(ctx, reqs, res)
}

// An event loop decides what all its ready clients sent in one batch: the
// requests that arrive while a round waits for the shards go out together
// in the next.
func TestClientsShareABatch(t *testing.T) {
	g := newGate(1)
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
	g.open <- struct{}{}
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

// A client with nothing to decide is answered while the shards are still
// deciding for the others of its round.
func TestLocalCommandsDoNotWaitForTheShards(t *testing.T) {
	g := newGate(2)
	addr := serveConfig(t, proxy.Config{Decider: g, Loops: 1})
	conns := make([]net.Conn, 3)
	readers := make([]*bufio.Reader, 3)
	for i := range conns {
		conns[i], readers[i] = raw(t, addr)
		io.WriteString(conns[i], "PING\r\n") // answered: the loop watches it
		if _, err := readers[i].ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	// The first round holds the loop while a THROTTLE and a PING arrive,
	// so that the next round reads both; its decision is held too.
	io.WriteString(conns[0], "THROTTLE a 9 1 1s\r\n")
	<-g.held
	io.WriteString(conns[1], "THROTTLE b 9 1 1s\r\n")
	io.WriteString(conns[2], "PING\r\n")
	g.open <- struct{}{}
	<-g.held
	conns[2].SetDeadline(time.Now().Add(2 * time.Second))
	line, err := readers[2].ReadString('\n')
	g.open <- struct{}{}
	if err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING in a round whose decision is held: %q, %v", line, err)
	}
	for _, r := range readers[:2] {
		if line, err := r.ReadString('\n'); err != nil || line != "*5\r\n" {
			t.Fatalf("THROTTLE: %q, %v", line, err)
		}
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

func TestInfoReportsLoops(t *testing.T) {
	for loops, want := range map[int]string{3: "io_loops:3\r\n", -1: "io_loops:0\r\n"} {
		c := newGoRedis(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops}))
		if text, err := c.Info(context.Background(), "server").Result(); err != nil || !strings.Contains(text, want) {
			t.Errorf("Loops %d: INFO server lacks %q: %q, %v", loops, want, text, err)
		}
	}
}
