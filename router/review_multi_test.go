package router

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A pin's connection that breaks after Pin.run let the transaction
// through (the watch not lost yet) but before its writer sent it must
// not be dialled again for it: on a new connection the transaction would
// run unwatched, though a watched key changed. Seen through sluice, one
// EXEC in a few hundred answered [OK] after another client's SET of the
// watched key when the node closed the pinned connection (CLIENT KILL,
// its idle timeout) as the client sent EXEC.
func TestReviewMultiPinBrokenBeforeExecIsWritten(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := NewCluster(ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second})
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	const key = "review:multi:pin"
	sl := slot.Of(key)
	forward := func(f Forward, args ...string) <-chan string {
		bs := make([][]byte, len(args))
		for i, a := range args {
			bs[i] = []byte(a)
		}
		f.Slot, f.Cmd = sl, AppendCommand(f.Cmd, bs)
		replies := make([][]byte, 1)
		got := make(chan string, 1)
		r.Forward(ctx, nil, []Forward{f}, replies, func([]int) { got <- string(replies[0]) })
		return got
	}
	wait := func(what string, ch <-chan string) string {
		t.Helper()
		select {
		case s := <-ch:
			return s
		case <-ctx.Done():
			t.Fatalf("%s: no reply", what)
			return ""
		}
	}
	if got := wait("SET", forward(Forward{}, "SET", key, "1")); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	p := r.Pin(sl, false)
	if got := wait("WATCH", forward(Forward{Pin: p}, "WATCH", key)); got != "+OK\r\n" {
		t.Fatalf("WATCH: %q", got)
	}
	if got := wait("SET by another client", forward(Forward{}, "SET", key, "2")); got != "+OK\r\n" {
		t.Fatalf("SET by another client: %q", got)
	}
	// The writer held: the transaction stays queued, as when its
	// goroutine has not run yet. Held once WATCH is done with (its reply
	// can come back before the pin counts it answered, which would hold
	// the transaction in the pin, and before the writer that sent it has
	// found the queue empty and ended, which would send the transaction).
	var conn net.Conn
	for conn == nil {
		p.mu.Lock()
		p.b.mu.Lock()
		if !p.b.writing && p.inflight == 0 {
			p.b.writing = true
			conn = p.b.conn
		}
		p.b.mu.Unlock()
		p.mu.Unlock()
		if conn != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("WATCH was not done with")
		case <-time.After(time.Millisecond):
		}
	}
	block := AppendCommand(nil, [][]byte{[]byte("MULTI")})
	block = AppendCommand(block, [][]byte{[]byte("SET"), []byte(key), []byte("3")})
	block = AppendCommand(block, [][]byte{[]byte("EXEC")})
	exec := forward(Forward{Cmd: block, Replies: 3, Pin: p, Unpin: true})
	p.b.mu.Lock()
	queued := len(p.b.queue)
	p.b.mu.Unlock()
	if queued != 1 {
		t.Fatalf("%d commands queued on the pin, want the transaction", queued)
	}
	conn.Close() // as the node's close: the pin's reader finds it broken
	for {
		p.b.mu.Lock()
		down := p.b.conn == nil
		p.b.mu.Unlock()
		if down {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the pin's connection was not found broken")
		case <-time.After(time.Millisecond):
		}
	}
	go p.b.write()
	if got := wait("EXEC", exec); got != "*-1\r\n" {
		t.Errorf("EXEC after the watched key changed and the pin's connection broke: %q, want null", got)
	}
	if got := wait("GET", forward(Forward{}, "GET", key)); got != "$1\r\n2\r\n" {
		t.Errorf("GET: %q, want the other client's 2", got)
	}
}
