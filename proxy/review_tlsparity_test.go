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

// A TLS client's failed handshake is that client's error, not the
// listener's: were it taken for an accept error (a handshake done in
// Accept, say), each would warn "accepting a client" and back the
// listener off (TestAcceptOutOfDescriptors), so that a stream of bad
// clients would delay every good one by up to a second.
func TestTLSFailedHandshakesAreNoAcceptErrors(t *testing.T) {
	certs := clustertest.NewCerts(t)
	core, logs := observer.New(zap.WarnLevel)
	_, secure := serveTLS(t, proxy.Config{Decider: router.NewMemory(0), Logger: zap.New(core)},
		serverTLS(t, certs, tls.RequireAndVerifyClientCert))
	const bad = 10
	for range bad {
		nc, err := net.Dial("tcp", secure)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(3 * time.Second))
		nc.Write([]byte("PING\r\n")) // plain RESP on the TLS port
		nc.Read(make([]byte, 1))
		nc.Close()
	}
	good := newTLSGoRedis(t, secure, certs.ClientTLS())
	if err := good.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	refused := func() (n int) {
		for _, e := range logs.All() {
			if strings.Contains(e.Message, "TLS handshake") {
				n++
			}
		}
		return n
	}
	waitUntil(t, "a warning for each refused client", func() bool { return refused() == bad })
	if got := len(logs.All()); got != bad {
		for _, e := range logs.All() {
			t.Logf("%s %v", e.Message, e.ContextMap())
		}
		t.Errorf("%d refused handshakes logged %d warnings, want one each", bad, got)
	}
}
