package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
	"unicode"
)

// tlsOptions are the flags of TLS, for clients (--tls-listen) and for the
// cluster (--cluster-tls), named as Redis names its own.
type tlsOptions struct {
	listen string
	// The certificate sluice serves clients with, and presents to the
	// cluster unless clientCert is given (Redis's tls-client-cert-file).
	cert, key string
	// ca verifies clients' certificates, and the nodes' (the system's
	// roots when empty).
	ca                    string
	clientCert, clientKey string
	authClients           string // yes, no or optional
	cluster               bool
	clusterUser           string
	clusterPassword       string
}

func (o *tlsOptions) check(listen, unix, cluster string) error {
	switch {
	case listen == "" && o.listen == "" && unix == "":
		return errors.New("--listen, --tls-listen and --unixsocket are all empty: nothing to serve")
	case o.authClients != "yes" && o.authClients != "no" && o.authClients != "optional":
		return fmt.Errorf("--tls-auth-clients must be yes, no or optional, not %q", o.authClients)
	case o.listen != "" && (o.cert == "" || o.key == ""):
		return errors.New("--tls-listen needs --tls-cert-file and --tls-key-file")
	case o.listen != "" && o.authClients != "no" && o.ca == "":
		return errors.New("--tls-auth-clients yes or optional needs --tls-ca-cert-file to verify clients' certificates (or --tls-auth-clients no)")
	case (o.clientCert == "") != (o.clientKey == ""):
		return errors.New("--tls-client-cert-file and --tls-client-key-file go together")
	case (o.cert == "") != (o.key == ""):
		return errors.New("--tls-cert-file and --tls-key-file go together")
	case cluster == "" && (o.cluster || o.clusterUser != "" || o.clusterPassword != ""):
		return errors.New("--cluster-tls, --cluster-user and --cluster-password need --cluster")
	case o.clusterUser != "" && o.clusterPassword == "":
		return errors.New("--cluster-user needs --cluster-password")
	}
	return nil
}

// serverTLS is how clients on --tls-listen are served. Client
// certificates are asked for as Redis's tls-auth-clients: yes requires
// one the CA signed, optional verifies one if it is presented.
func (o *tlsOptions) serverTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(o.cert, o.key)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file, --tls-key-file: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	switch o.authClients {
	case "yes":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case "optional":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if o.authClients != "no" {
		if cfg.ClientCAs, err = loadCA(o.ca); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// clusterTLS is how sluice reaches the nodes with --cluster-tls, nil
// without it. As Redis's own cluster bus and replication, it uses the
// tls-* files: the nodes are verified against --tls-ca-cert-file (the
// system's roots without it) and sluice presents --tls-client-cert-file,
// else --tls-cert-file, else nothing (nodes with tls-auth-clients no).
// warning says when that certificate is not valid now (expired, or not
// yet valid): nodes that verify it refuse every connection, and under TLS
// 1.3 they refuse it after sluice's side of the handshake is done, so
// sluice sees only a reset connection that does not say why.
func (o *tlsOptions) clusterTLS(now time.Time) (cfg *tls.Config, warning string, err error) {
	if !o.cluster {
		return nil, "", nil
	}
	cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	if o.ca != "" {
		if cfg.RootCAs, err = loadCA(o.ca); err != nil {
			return nil, "", err
		}
	}
	certFile, keyFile, flags := o.clientCert, o.clientKey, "--tls-client-cert-file, --tls-client-key-file"
	if certFile == "" {
		certFile, keyFile, flags = o.cert, o.key, "--tls-cert-file, --tls-key-file"
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", flags, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
		if leaf := cert.Leaf; leaf != nil {
			switch {
			case now.After(leaf.NotAfter):
				warning = fmt.Sprintf("%s: the certificate presented to the cluster's nodes expired at %s: nodes that verify clients' certificates refuse every connection", flags, leaf.NotAfter.UTC().Format(time.RFC3339))
			case now.Before(leaf.NotBefore):
				warning = fmt.Sprintf("%s: the certificate presented to the cluster's nodes is not valid before %s: nodes that verify clients' certificates refuse every connection until then", flags, leaf.NotBefore.UTC().Format(time.RFC3339))
			}
		}
	}
	return cfg, warning, nil
}

// resetHint is what may be missing when the nodes close the connections
// sluice opens with cfg (clusterTLS's) unanswered, as the error alone does
// not say why: a TLS-only node closes a plain connection, and under TLS
// 1.3 a node that verifies clients' certificates (Redis's default,
// tls-auth-clients yes) closes one that presents none, or one its
// authority did not sign, after sluice's side of the handshake is done.
func (o *tlsOptions) resetHint(cfg *tls.Config) string {
	switch {
	case cfg == nil:
		return "are the nodes TLS-only? then give --cluster-tls"
	case len(cfg.Certificates) == 0:
		return "do the nodes require clients' certificates (tls-auth-clients yes, Redis's default)? then give --tls-client-cert-file and --tls-client-key-file (or --tls-cert-file and --tls-key-file)"
	case o.clientCert != "":
		return "do the nodes trust the certificate of --tls-client-cert-file (signed by their tls-ca-cert-file's authority)?"
	}
	return "do the nodes trust the certificate of --tls-cert-file, presented to them without --tls-client-cert-file (signed by their tls-ca-cert-file's authority)?"
}

func loadCA(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca-cert-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-ca-cert-file: no PEM certificate in %s", file)
	}
	return pool, nil
}

// listenAddrs are --listen's addresses: Redis's bind takes several,
// separated by spaces; commas are how sluice's other lists are written.
func (o options) listenAddrs() []string {
	return strings.FieldsFunc(o.listen, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// listeners listens on --listen's addresses, on --tls-listen with
// serverTLS and on --unixsocket, those that are set, in that order: the
// first is the address INFO gives and the node's, so a TCP one whenever
// one is served (cluster-mode clients need it); the TLS one follows the
// plain ones (servedAddrs).
func listeners(o options, serverTLS *tls.Config) ([]net.Listener, error) {
	var lns []net.Listener
	fail := func(err error) ([]net.Listener, error) {
		for _, ln := range lns {
			ln.Close()
		}
		return nil, err
	}
	networks := o.listenNetworks()
	for i, addr := range o.listenAddrs() {
		ln, err := net.Listen(networks[i], addr)
		if err != nil {
			return fail(err)
		}
		lns = append(lns, ln)
	}
	if o.tls.listen != "" {
		ln, err := listen(o.tls.listen)
		if err != nil {
			return fail(err)
		}
		lns = append(lns, tls.NewListener(ln, serverTLS))
	}
	if o.unix.path != "" {
		ln, err := o.unix.listen()
		if err != nil {
			return fail(err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// listenNetworks are the networks listeners takes for --listen's
// addresses. A wildcard IPv6 address ([::] or an empty host) serves both
// families, unless an IPv4 address of its port is listed too: then it
// serves IPv6 alone, as Redis's bind * -::* (IPV6_V6ONLY), since a socket
// of both families would hold that port's IPv4 side and the IPv4 address
// could not be listened on.
func (o options) listenNetworks() []string {
	addrs := o.listenAddrs()
	ipv4Ports := map[string]bool{}
	for _, addr := range addrs {
		if _, port, err := net.SplitHostPort(addr); err == nil && listenNetwork(addr) == "tcp4" {
			ipv4Ports[port] = true
		}
	}
	networks := make([]string, len(addrs))
	for i, addr := range addrs {
		networks[i] = listenNetwork(addr)
		host, port, err := net.SplitHostPort(addr)
		if err != nil || !ipv4Ports[port] {
			continue
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() && ip.To4() == nil {
			networks[i] = "tcp6"
		}
	}
	return networks
}

// listen listens on addr as Redis binds: an IPv4 address, 0.0.0.0 too,
// on IPv4 alone (Go would take 0.0.0.0 for a socket of both families).
func listen(addr string) (net.Listener, error) {
	return net.Listen(listenNetwork(addr), addr)
}

// listenNetwork is the network listen takes for addr.
func listenNetwork(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.To4() != nil {
			return "tcp4"
		}
	}
	return "tcp"
}

// servedAddrs are the addresses of listeners' plain listeners, separated
// by commas, and of its TLS listener, "" for none served.
func servedAddrs(o options, lns []net.Listener) (plain, secure string) {
	var addrs []string
	for _, ln := range lns[:len(o.listenAddrs())] {
		addrs = append(addrs, ln.Addr().String())
	}
	if o.tls.listen != "" {
		secure = lns[len(o.listenAddrs())].Addr().String()
	}
	return strings.Join(addrs, ","), secure
}

// exposed is the first listen address other hosts may reach without
// authenticating, as flag and address, or "": a TLS listener that
// requires client certificates authenticates its clients.
func exposed(o options) string {
	for _, addr := range o.listenAddrs() {
		if !loopback(addr) {
			return "--listen " + addr
		}
	}
	if o.tls.listen != "" && o.tls.authClients != "yes" && !loopback(o.tls.listen) {
		return "--tls-listen " + o.tls.listen
	}
	return ""
}
