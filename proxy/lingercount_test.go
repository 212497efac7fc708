package proxy_test

import (
	"io"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// A client closed after QUIT or a protocol error is no longer counted
// once its reply is written, as Redis frees it then: sluice lingers up
// to a second discarding its input (so that no reset drops the reply),
// and meanwhile it was still in INFO's connected_clients and in CLIENT
// LIST. Its socket still holds a place under --maxclients until it is
// closed: lingering clients must not take sluice past its descriptors.
// Both serving paths; the client keeps its socket open.
func TestClosingClientIsNotCountedWhileItLingers(t *testing.T) {
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		cfg.Decider, cfg.Backend, cfg.MaxClients = router.NewMemory(0), "embedded", 2
		for _, tc := range []struct{ send, reply string }{
			{"*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
			{"QUIT\r\n", "+OK\r\n"},
		} {
			// A server each: a client closed before is not counted out
			// until the server reads its EOF.
			_, addr := serveServer(t, cfg)
			info := dialRaw(t, addr)
			if got := info.do("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING: %q", got)
			}
			bad := dialRaw(t, addr)
			if _, err := bad.c.Write([]byte(tc.send)); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(bad.br) // the reply, then the server's EOF
			if err != nil || string(got) != tc.reply {
				t.Fatalf("%q: %q, %v", tc.send, got, err)
			}
			if got := dialRaw(t, addr).read(); got != "-ERR max number of clients reached\r\n" {
				t.Errorf("after %q, its client still open: a third client got %q, want refused at --maxclients 2", tc.send, got)
			}
			if got := info.do("INFO", "clients"); !strings.Contains(got, "\r\nconnected_clients:1\r\n") {
				t.Errorf("after %q, its client still open: INFO clients %q, want connected_clients:1", tc.send, got)
			}
			if got := info.do("CLIENT", "LIST"); strings.Count(got, "id=") != 1 {
				t.Errorf("after %q, its client still open: CLIENT LIST %q, want one client", tc.send, got)
			}
		}
	})
}
