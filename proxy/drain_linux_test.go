package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// lateShards decides as the embedded backend does, d later; submitted
// hears of each round it is given.
type lateShards struct {
	m         *router.Memory
	d         time.Duration
	submitted chan struct{}
}

func (s lateShards) Submit(ctx context.Context, reqs []router.Request, res []router.Result, done func([]int)) {
	select {
	case s.submitted <- struct{}{}:
	default:
	}
	go func() {
		time.Sleep(s.d)
		s.m.Decide(ctx, reqs, res)
		done(nil)
	}()
}

// A client the accepting goroutine hands a loop while it drains (accepted
// just before Shutdown closed the listener) is closed with the rest, not
// served on: Shutdown would otherwise wait for it until its deadline.
func TestDrainClosesAClientAddedMeanwhile(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	submitted := make(chan struct{}, 1)
	s := New(Config{Decider: lateShards{m: router.NewMemory(0), d: 200 * time.Millisecond, submitted: submitted}, Loops: 1, Backend: "test"})
	go s.Serve(ln)
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.SetDeadline(time.Now().Add(10 * time.Second))
	a.Write([]byte("*5\r\n$8\r\nTHROTTLE\r\n$1\r\nk\r\n$1\r\n5\r\n$1\r\n1\r\n$2\r\n1s\r\n"))
	select { // read, and being decided
	case <-submitted:
	case <-time.After(5 * time.Second):
		t.Fatal("the THROTTLE was not submitted")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	start := time.Now()
	go func() { shut <- s.Shutdown(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); !s.isDraining(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not start draining")
		}
	}
	// Its reply comes once the loop drains: no wake-up of the loop is
	// due after it.
	if got, err := bufio.NewReader(a).ReadString('\n'); err != nil || !strings.HasPrefix(got, "*5") {
		t.Errorf("the client's reply owed: %q, %v", got, err)
	}

	// As acceptLoops hands over a client it accepted.
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b, err := net.Dial("tcp", other.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	nc, err := other.Accept()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := takeSocket(nc)
	if err != nil {
		t.Fatal(err)
	}
	s.admit() // counted, as acceptLoops counts a client
	c := &fdConn{client: s.newClient(nc.RemoteAddr().String(), nc.LocalAddr(), fd), fd: fd, f: s.newFramer()}
	c.client.fd = c
	s.loops[0].add(c)

	b.SetDeadline(time.Now().Add(4 * time.Second))
	b.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	if got, err := io.ReadAll(b); err != nil || len(got) > 0 {
		t.Errorf("the client added while draining: read %q, %v; want it closed unanswered", got, err)
	}
	if err := <-shut; err != nil || time.Since(start) > 3*time.Second {
		t.Errorf("Shutdown: %v after %v, want nil within the second a closed client lingers", err, time.Since(start))
	}
}

// An idle client (a pooled connection that sent nothing since its last
// reply) is closed at once when the loop drains: it owes nothing and was
// sent nothing it has not read, so its close loses no reply, and pooled
// connections must not hold Shutdown for the second a closing client
// lingers.
func TestDrainClosesIdleClientsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Decider: router.NewMemory(0), Loops: 1, Backend: "test"})
	go s.Serve(ln)
	defer s.Close() // after a Fatal before Shutdown too
	idle := make([]net.Conn, 3)
	for i := range idle {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "+PONG\r\n" {
			t.Fatalf("PING: %q, %v", got, err)
		}
		idle[i] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= lingerTime {
		t.Errorf("Shutdown took %v with idle clients only: they lingered", took)
	}
	for i, c := range idle {
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("idle client %d: read %d, %v after Shutdown; want EOF", i, n, err)
		}
	}
}
