package main

import (
	"errors"
	"net"
	"net/http"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// failingListener's Accept fails with a permanent error, as a listener
// whose socket broke does: http.Server.Serve returns it.
type failingListener struct{ net.Listener }

func (failingListener) Accept() (net.Conn, error) { return nil, errors.New("accept: broken") }

// The metrics (or pprof) server ending on its own stops /metrics,
// /healthz and /readyz: it is logged, not left to be found by a probe
// that times out. Its listener closed as sluice stops is not an error.
func TestHTTPServeErrorIsLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	core, logs := observer.New(zapcore.InfoLevel)
	serveHTTP(zap.New(core), "metrics", http.NewServeMux(), failingListener{ln})
	if e := logs.All(); len(e) != 1 || e[0].Level != zapcore.ErrorLevel || e[0].ContextMap()["error"] != "accept: broken" {
		t.Fatalf("a failed Serve logged %v, want one error naming it", e)
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	core, logs = observer.New(zapcore.InfoLevel)
	serveHTTP(zap.New(core), "metrics", http.NewServeMux(), closed)
	if e := logs.All(); len(e) != 0 {
		t.Fatalf("a closed listener logged %v", e)
	}
}
