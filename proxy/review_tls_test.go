package proxy_test

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A TLS client refused in its handshake (no certificate where one is
// required, one of an unknown authority, plain RESP on the TLS port) is
// a warning naming it and why, as Redis logs "Error accepting a client
// connection": otherwise nothing at the default level says why a client
// is refused. One that connects and goes away without a word (a TCP
// health check) is not.
func TestTLSRefusedHandshakeLogged(t *testing.T) {
	certs, other := clustertest.NewCerts(t), clustertest.NewCerts(t)
	core, logs := observer.New(zap.WarnLevel)
	_, secure := serveTLS(t, proxy.Config{Decider: router.NewMemory(0), Logger: zap.New(core)},
		serverTLS(t, certs, tls.RequireAndVerifyClientCert))

	refused := func(what string, dial func(net.Conn)) {
		t.Helper()
		nc, err := net.Dial("tcp", secure)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		local := nc.LocalAddr().String()
		nc.SetDeadline(time.Now().Add(3 * time.Second))
		dial(nc)
		waitUntil(t, what+": a warning naming the client", func() bool {
			for _, e := range logs.All() {
				if e.ContextMap()["addr"] == local && strings.Contains(e.Message, "TLS handshake") {
					return true
				}
			}
			return false
		})
	}
	handshake := func(tc *tls.Config) func(net.Conn) {
		return func(nc net.Conn) {
			tc.ServerName = "localhost"
			c := tls.Client(nc, tc)
			c.Handshake()
			c.Read(make([]byte, 1)) // TLS 1.3: the refusal comes after the client's side is done
		}
	}
	refused("no certificate", handshake(&tls.Config{RootCAs: certs.Pool}))
	refused("unknown authority", handshake(&tls.Config{RootCAs: certs.Pool, Certificates: []tls.Certificate{other.Client}}))
	refused("plain RESP", func(nc net.Conn) {
		nc.Write([]byte("PING\r\n"))
		nc.Read(make([]byte, 1))
	})

	n := len(logs.All())
	quiet, err := net.Dial("tcp", secure)
	if err != nil {
		t.Fatal(err)
	}
	quiet.Close()
	good := newTLSGoRedis(t, secure, certs.ClientTLS())
	if err := good.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if got := logs.All()[n:]; len(got) != 0 {
		t.Errorf("a client that said nothing, then a good one: %d warnings, want none: %v", len(got), got[0].Message)
	}
}
