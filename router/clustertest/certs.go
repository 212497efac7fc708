package clustertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are a certificate authority made for one test and certificates it
// signed, as PEM files in a temporary directory: nothing is committed, and
// nothing outlives the test. The node certificate names 127.0.0.1 and
// localhost and serves both ends (Redis's cluster bus and replication use
// it as a client too), so it also serves sluice in tests.
type Certs struct {
	Dir string
	// CAFile is the authority's certificate; Pool holds it.
	CAFile string
	Pool   *x509.CertPool
	// CertFile and KeyFile are a certificate for 127.0.0.1 and localhost,
	// good for servers and for clients.
	CertFile, KeyFile string
	// ClientCertFile and ClientKeyFile are a client's certificate, Client
	// the same loaded.
	ClientCertFile, ClientKeyFile string
	Client                        tls.Certificate
}

// NewCerts makes a certificate authority and its certificates in
// t.TempDir(). Two calls make two unrelated authorities: one's client
// certificate is unknown to the other's servers.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	c, err := WriteCerts(t.TempDir())
	if err != nil {
		t.Fatalf("clustertest: making certificates: %v", err)
	}
	return c
}

// ClientTLS is a client's TLS configuration: it trusts the authority and
// presents the client certificate.
func (c *Certs) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: c.Pool, Certificates: []tls.Certificate{c.Client}}
}

// WriteCerts is NewCerts outside a test (make bench): the files go to dir,
// which must exist.
func WriteCerts(dir string) (*Certs, error) {
	c := &Certs{Dir: dir, Pool: x509.NewCertPool()}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "clustertest CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, err
	}
	c.Pool.AddCert(ca)
	c.CAFile = filepath.Join(dir, "ca.crt")
	if err := writePEM(c.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	issue := func(serial int64, name string, usage []x509.ExtKeyUsage) (certFile, keyFile string, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usage,
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			DNSNames:     []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return "", "", err
		}
		certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		return certFile, keyFile, writePEM(keyFile, "PRIVATE KEY", keyDER)
	}
	if c.CertFile, c.KeyFile, err = issue(2, "node", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}); err != nil {
		return nil, err
	}
	if c.ClientCertFile, c.ClientKeyFile, err = issue(3, "client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}); err != nil {
		return nil, err
	}
	if c.Client, err = tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile); err != nil {
		return nil, err
	}
	return c, nil
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
