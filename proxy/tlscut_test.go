package proxy

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// A TLS client cut for its output limit (from a node connection's reader,
// the goroutine path's accept) is closed at once: closing the TLS
// connection writes its close_notify alert first, which waited up to 5 s
// for a client that reads nothing, with every other reply from that node
// waiting behind it.
func TestCutTLSClientDoesNotWaitForItsAlert(t *testing.T) {
	certs := clustertest.NewCerts(t)
	cert, err := tls.LoadX509KeyPair(certs.CertFile, certs.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	// net.Pipe: a write waits until the other side reads.
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	server := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{cert}})
	tc := certs.ClientTLS()
	tc.ServerName = "localhost"
	client := tls.Client(b, tc)
	handshaken := make(chan error, 1)
	go func() { handshaken <- client.Handshake() }()
	if err := server.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-handshaken; err != nil {
		t.Fatal(err)
	}
	// From now on the client reads nothing.
	c := &framedConn{Conn: server}
	cut := make(chan error, 1)
	go func() { cut <- c.cut() }()
	select {
	case <-cut:
	case <-time.After(2 * time.Second):
		t.Fatal("cutting a TLS client that reads nothing waited for it")
	}
}
