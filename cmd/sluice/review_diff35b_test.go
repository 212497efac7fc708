package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// --unixsocket beside --tls-listen alone: a TLS cluster client is still
// sent back to the TLS port, as before the socket was served; the socket
// is no TCP address to hand out, nor INFO's tcp_port.
func TestReviewUnixSocketBesideTLSOnlyKeepsClusterMode(t *testing.T) {
	requireRedisCLI(t)
	certs := clustertest.NewCerts(t)
	path := filepath.Join(t.TempDir(), "s.sock")
	p := start(t, binary(t), nil, "--listen", "", "--unixsocket", path, "--tls-listen", "127.0.0.1:0",
		"--tls-cert-file", certs.CertFile, "--tls-key-file", certs.KeyFile, "--tls-ca-cert-file", certs.CAFile)
	_, port, _ := strings.Cut(p.tlsAddr, ":")
	got, err := redisCLITLS(p.tlsAddr, certs, certs.ClientCertFile, certs.ClientKeyFile, "CLUSTER", "SLOTS")
	if err != nil || !strings.Contains(got, "127.0.0.1\n"+port+"\n") {
		t.Errorf("CLUSTER SLOTS over TLS beside a Unix socket: %q, %v; want the TLS port %s", got, err, port)
	}
	got, err = redisCLITLS(p.tlsAddr, certs, certs.ClientCertFile, certs.ClientKeyFile, "INFO", "server")
	if err != nil || !strings.Contains(got, "tcp_port:"+port+"\r") {
		t.Errorf("INFO over TLS beside a Unix socket: %q, %v; want tcp_port:%s as with TLS alone", got, err, port)
	}
	stop(t, p)
}
