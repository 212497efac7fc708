package proxy_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// Shutdown ends a client blocked in BLPOP and a subscriber at once, as
// Redis ends them when it shuts down: neither has a command it waits for a
// reply to from sluice's side, so neither may hold Shutdown until its
// deadline. Both serving paths.
func TestShutdownEndsBlockedClientsAndSubscribers(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{1, -1} {
		srv, ln, served := startServer(t, proxy.Config{Decider: r, Forwarder: r, Backend: "test", Loops: loops})
		addr := ln.Addr().String()

		blocked := dialRaw(t, addr)
		key := "{shutblock}" + strconv.Itoa(-loops)
		waiting := blpopWaiters(t, c, key)
		blocked.send([]string{"BLPOP", key, "0"})
		sub := dialRaw(t, addr)
		if got := sub.do("SUBSCRIBE", "shutchan"); got != "*3\r\n$9\r\nsubscribe\r\n$8\r\nshutchan\r\n:1\r\n" {
			t.Fatalf("loops %d: SUBSCRIBE: %q", loops, got)
		}
		waitUntil(t, "the BLPOP waits at its node", func() bool { return waiting() == 1 })

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		err := srv.Shutdown(ctx)
		took := time.Since(start)
		cancel()
		if err != nil || took > 3*time.Second {
			t.Errorf("loops %d: Shutdown: %v after %v, want nil within the second a closed client lingers", loops, err, took)
		}
		for name, rc := range map[string]*rawConn{"blocked": blocked, "subscriber": sub} {
			rc.c.SetReadDeadline(time.Now().Add(2 * time.Second))
			for {
				if _, err := rc.br.ReadByte(); err != nil {
					if ne, ok := err.(net.Error); ok && ne.Timeout() {
						t.Errorf("loops %d: the %s client was not closed", loops, name)
					}
					break
				}
			}
		}
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("loops %d: Serve: %v", loops, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("loops %d: Serve did not return after Shutdown", loops)
		}
		// A second Shutdown and a Close are safe.
		if err := srv.Shutdown(context.Background()); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("loops %d: second Shutdown: %v", loops, err)
		}
		srv.Close()
	}
}

// A reply being written when Shutdown begins is written whole before its
// client is closed, on both serving paths: here 8 MB that a client reads
// only once Shutdown has begun.
func TestShutdownWritesAReplyBeingWritten(t *testing.T) {
	big := strings.Repeat("z", 8<<20)
	want := "$" + strconv.Itoa(len(big)) + "\r\n" + big + "\r\n"
	for _, loops := range []int{1, -1} {
		srv, ln, served := startServer(t, proxy.Config{Decider: router.NewMemory(0), Backend: "test", Loops: loops})
		c := dialRaw(t, ln.Addr().String())
		c.c.(*net.TCPConn).SetReadBuffer(256 << 10) // no autotuning past it
		c.send([]string{"ECHO", big})
		// Its first byte in: the command was read and answered, and the
		// reply is being written (the client's small buffer holds it up).
		c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.br.Peek(1); err != nil {
			t.Fatalf("loops %d: no reply to ECHO: %v", loops, err)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		shut := make(chan error, 1)
		go func() { shut <- srv.Shutdown(ctx) }()
		// Shutdown has begun once the listener refuses connections.
		waitUntil(t, "Shutdown closes the listener", func() bool {
			d, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
			if err == nil {
				d.Close()
			}
			return err != nil
		})
		c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(c.br)
		if string(got) != want {
			t.Errorf("loops %d: read %d bytes (%v), want the reply's %d and the close", loops, len(got), err, len(want))
		}
		if err := <-shut; err != nil {
			t.Errorf("loops %d: Shutdown: %v", loops, err)
		}
		cancel()
		<-served
	}
}

// The loops drain together: a client that sent half a command (an idle
// one is closed at once) lingers its second on each loop at once, not a
// second per loop one after the other, which would take a server with a
// loop per core past --shutdown-timeout, and close the clients of the
// last loops with their replies unwritten.
func TestShutdownDrainsTheLoopsTogether(t *testing.T) {
	const loops = 8
	srv, ln, served := startServer(t, proxy.Config{Decider: router.NewMemory(0), Backend: "test", Loops: loops})
	for range loops { // one on each loop: they are handed out in turn
		c := dialRaw(t, ln.Addr().String())
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("PING: %q", got)
		}
		if _, err := c.c.Write([]byte("PIN")); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil || time.Since(start) > 3*time.Second {
		t.Errorf("Shutdown: %v after %v, want nil within about the second a client lingers", err, time.Since(start))
	}
	<-served
}

// Close ends the blocking commands of the clients it closes, at their
// nodes too: neither a goroutine nor a node's connection waits on for an
// element no one will take. Both serving paths.
func TestCloseEndsBlockingCommandsAtTheNodes(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{1, -1} {
		srv, ln, served := startServer(t, proxy.Config{Decider: r, Forwarder: r, Backend: "test", Loops: loops})
		k := "{closeblock}" + strconv.Itoa(-loops)
		waiting := blpopWaiters(t, c, k)
		blocked := dialRaw(t, ln.Addr().String())
		blocked.send([]string{"BLPOP", k, "0"})
		waitUntil(t, "the BLPOP waits at its node", func() bool { return waiting() == 1 })
		srv.Close()
		<-served
		waitUntil(t, "the node's blocked connection closes", func() bool { return waiting() == 0 })
	}
}

// startServer serves cfg on a loopback port; served has Serve's result.
// The server is closed when t ends, if the test did not shut it down: a
// Fatal before the test's own Shutdown or Close must not leave a loop
// running, which TestInfoReportsLoops would wait for.
func startServer(t *testing.T, cfg proxy.Config) (*proxy.Server, net.Listener, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(cfg)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return srv, ln, served
}

// Shutdown answers every command a client served on a goroutine sent
// before it, though they were read but not yet taken (the framer reads
// more at once than redcon takes per pipeline), and then closes it. The
// pipeline is one write of 9 KB, in the socket before sluice accepts the
// connection: sluice's first read takes it all, before the gated decision
// of its first command is submitted.
func TestShutdownAnswersWhatWasRead(t *testing.T) {
	g := gatedDecider{Decider: router.NewMemory(0), submitted: make(chan struct{}, 8), release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conn := dialRaw(t, ln.Addr().String()) // in the listener's backlog
	const pings = 1500                     // 9 KB inline: more than redcon takes at once
	conn.c.Write([]byte("THROTTLE k 5 1 1s\r\n" + strings.Repeat("PING\r\n", pings)))
	srv := proxy.New(proxy.Config{Decider: g, Backend: "test", Loops: -1})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	<-g.submitted
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	close(g.release)
	if got := conn.read(); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
		t.Fatalf("THROTTLE: %q", got)
	}
	for i := range pings {
		if got := conn.read(); got != "+PONG\r\n" {
			t.Fatalf("PING %d of %d: %q", i+1, pings, got)
		}
	}
	if _, err := conn.br.ReadByte(); err != io.EOF {
		t.Fatalf("after the replies: %v, want EOF", err)
	}
	conn.c.Close() // ends sluice's linger at once
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	<-served
}

// gatedForwarder holds each round's forwarded commands until release is
// closed, then forwards them on sluice's own connections (an event loop's
// pipes are its goroutine's only).
type gatedForwarder struct {
	*router.Cluster
	sent    chan struct{}
	release chan struct{}
}

func (g gatedForwarder) Forward(ctx context.Context, _ router.Pipes, cmds []router.Forward, replies [][]byte, done func(idx []int)) {
	select {
	case g.sent <- struct{}{}:
	default:
	}
	go func() {
		<-g.release
		g.Cluster.Forward(ctx, nil, cmds, replies, done)
	}()
}

// On a loop, a command read but waiting for those before it (here a
// SUBSCRIBE behind a GET, and a PING behind that) is still taken and
// answered when Shutdown comes meanwhile, as Shutdown answers every
// command sluice has read; the client is closed after. (The loop dropped
// them: it stopped taking a closing client's commands.) Both serving
// paths.
func TestShutdownTakesCommandsThatWaited(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{1, -1} {
		t.Run(strconv.Itoa(loops), func(t *testing.T) { shutdownTakesCommandsThatWaited(t, r, loops) })
	}
}

func shutdownTakesCommandsThatWaited(t *testing.T, r *router.Cluster, loops int) {
	g := gatedForwarder{Cluster: r, sent: make(chan struct{}, 1), release: make(chan struct{})}
	srv, ln, served := startServer(t, proxy.Config{Decider: r, Forwarder: g, Backend: "test", Loops: loops})
	idle := dialRaw(t, ln.Addr().String())
	if got := idle.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
	w := dialRaw(t, ln.Addr().String())
	w.send([]string{"GET", "{shutwait}k"}, []string{"SUBSCRIBE", "shutwait"}, []string{"PING"})
	<-g.sent // the GET is out; SUBSCRIBE waits for it
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	// Shutdown began once the listener is closed; a loop drains once it
	// closed the idle client, at once.
	waitUntil(t, "the listener is closed", func() bool {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
	if loops > 0 {
		idle.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := idle.br.ReadByte(); err != io.EOF {
			t.Fatalf("the idle client: %v, want EOF once the loop drains", err)
		}
	}
	close(g.release)
	w.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(w.br)
	want := "$-1\r\n" + "*3\r\n$9\r\nsubscribe\r\n$8\r\nshutwait\r\n:1\r\n" + "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
	if string(got) != want {
		t.Errorf("read %q (%v), want the three replies and the close %q", got, err, want)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	<-served
}
