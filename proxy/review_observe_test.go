package proxy_test

import (
	"io"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// A protocol error's reply counts in total_error_replies as soon as it is
// sent, as Redis counts it before writing it: on the goroutine path it
// was counted only once the connection closed, up to a second later
// (lingerTime), or when the client closed its side, so an INFO read
// right after the error, the client still connected, left it out.
func TestReviewProtocolErrorCountedWhenSent(t *testing.T) {
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		cfg.Decider, cfg.Backend = router.NewMemory(0), "embedded"
		srv, addr := serveServer(t, cfg)
		bad := dialRaw(t, addr)
		if _, err := bad.c.Write([]byte("*x\r\n")); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(bad.br) // the reply, then the server's EOF
		if err != nil || string(got) != "-ERR Protocol error: invalid multibulk length\r\n" {
			t.Fatalf("*x: %q, %v", got, err)
		}
		if info := dialRaw(t, addr).do("INFO", "stats"); !strings.Contains(info, "\r\ntotal_error_replies:1\r\n") {
			t.Errorf("INFO stats: %q, want total_error_replies:1", info)
		}
		if text := scrape(t, srv); !strings.Contains(text, "\nsluice_error_replies_total 1\n") {
			t.Error("metrics lack sluice_error_replies_total 1")
		}
	})
}
