package proxy_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// On the goroutine path an idle client is closed as soon as Shutdown
// begins, as on a loop, though another client's reply still holds the
// drain: it stayed open until the drain ended, and a command it sent
// meanwhile was served after SIGTERM.
func TestShutdownClosesIdleGoroutineClientsAtOnce(t *testing.T) {
	g := gatedDecider{Decider: router.NewMemory(0), submitted: make(chan struct{}, 8), release: make(chan struct{})}
	srv, ln, served := startServer(t, proxy.Config{Decider: g, Backend: "test", Loops: -1})
	idle := dialRaw(t, ln.Addr().String())
	if got := idle.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
	busy := dialRaw(t, ln.Addr().String())
	busy.send([]string{"THROTTLE", "k", "5", "1", "1s"})
	<-g.submitted
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	idle.c.SetReadDeadline(time.Now().Add(2 * time.Second))
	got, err := io.ReadAll(idle.br)
	if err != nil || len(got) != 0 {
		t.Errorf("the idle client: read %q (%v), want its close while the THROTTLE is decided", got, err)
	}
	close(g.release)
	if got := busy.read(); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
		t.Errorf("THROTTLE: %q", got)
	}
	busy.c.Close() // ends sluice's linger at once
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	<-served
}

// A protocol error's reply counts in total_error_replies and
// sluice_error_replies_total, as Redis counts it (its "Protocol error"
// replies go through addReplyError): the counters left them out. Both
// serving paths, and an unbalanced inline quote, which the loop finds
// apart from the framer.
func TestProtocolErrorRepliesCounted(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0), Backend: "embedded"}, func(t *testing.T, cfg proxy.Config) {
		srv, addr := serveServer(t, cfg)
		for _, c := range []struct{ send, want string }{
			{"*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
			{"\"bad\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		} {
			conn := dialRaw(t, addr)
			conn.c.Write([]byte(c.send))
			if got := conn.read(); got != c.want {
				t.Fatalf("%q: %q, want %q", c.send, got, c.want)
			}
			conn.c.Close() // ends sluice's linger at once
		}
		info := dialRaw(t, addr)
		waitUntil(t, "the protocol errors are counted", func() bool {
			return infoField(t, info.do("INFO", "stats"), "total_error_replies") == "2"
		})
		if want := "\nsluice_error_replies_total 2\n"; !strings.Contains(scrape(t, srv), want) {
			t.Errorf("metrics lack %q", want)
		}
	})
}
