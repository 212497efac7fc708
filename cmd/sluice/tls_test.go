package main

import (
	"bufio"
	"context"
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
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// redisCLITLS runs redis-cli over TLS, trusting certs' CA and presenting
// the given client certificate (none when cert is "").
func redisCLITLS(addr string, certs *clustertest.Certs, cert, key string, args ...string) (string, error) {
	host, port, _ := strings.Cut(addr, ":")
	tlsArgs := []string{"-h", host, "-p", port, "--tls", "--cacert", certs.CAFile}
	if cert != "" {
		tlsArgs = append(tlsArgs, "--cert", cert, "--key", key)
	}
	out, err := exec.Command("redis-cli", append(tlsArgs, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func TestTLSFlagsRefused(t *testing.T) {
	certs := clustertest.NewCerts(t)
	none := noEnv
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", ""}, "nothing to serve"},
		{[]string{"--tls-listen", "127.0.0.1:0"}, "--tls-listen needs --tls-cert-file"},
		{[]string{"--tls-listen", "127.0.0.1:0", "--tls-cert-file", certs.CertFile, "--tls-key-file", certs.KeyFile}, "needs --tls-ca-cert-file"},
		{[]string{"--tls-auth-clients", "maybe"}, "--tls-auth-clients must be yes, no or optional"},
		{[]string{"--tls-cert-file", certs.CertFile}, "go together"},
		{[]string{"--cluster-tls"}, "need --cluster"},
		{[]string{"--cluster", "127.0.0.1:7000", "--cluster-user", "u"}, "--cluster-user needs --cluster-password"},
		{[]string{"--tls-listen", "0.0.0.0:0", "--tls-cert-file", certs.CertFile, "--tls-key-file", certs.KeyFile, "--tls-auth-clients", "optional", "--tls-ca-cert-file", certs.CAFile}, "protected mode: --tls-listen 0.0.0.0:0"},
	} {
		var out strings.Builder
		if code := run(tt.args, none, &out); code != 2 || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tt.args, code, out.String(), tt.want)
		}
	}
	// Client certificates required: the TLS listener authenticates its
	// clients, so protected mode lets it listen on every address.
	o := options{protectedMode: "yes", tls: tlsOptions{listen: "0.0.0.0:0", authClients: "yes"}}
	if _, err := loadUsers(o); err != nil {
		t.Errorf("--tls-listen 0.0.0.0:0 with client certificates required: %v, want it to start", err)
	}
}

// refusedMsg is what sluice logs of a client refused in its handshake.
const refusedMsg = "client refused: TLS handshake failed"

// --tls-listen with an empty --listen: sluice serves TLS only, to clients
// with a certificate of the CA; one of another authority, or none, is
// refused; plain RESP gets nothing on the TLS port.
func TestTLSListen(t *testing.T) {
	requireRedisCLI(t)
	certs, stranger := clustertest.NewCerts(t), clustertest.NewCerts(t)
	p := start(t, binary(t), nil, "--listen", "", "--tls-listen", "127.0.0.1:0",
		"--tls-cert-file", certs.CertFile, "--tls-key-file", certs.KeyFile, "--tls-ca-cert-file", certs.CAFile)
	if p.addr != "" || p.tlsAddr == "" {
		t.Fatalf("serving plain on %q and TLS on %q, want TLS only", p.addr, p.tlsAddr)
	}
	for want := 4; want >= 0; want-- {
		got, err := redisCLITLS(p.tlsAddr, certs, certs.ClientCertFile, certs.ClientKeyFile, "THROTTLE", "user:1", "5", "1", "1m")
		if f := strings.Fields(got); err != nil || len(f) != 5 || f[0] != "0" || f[2] != strconv.Itoa(want) {
			t.Fatalf("THROTTLE over TLS: %q, %v; want allowed with %d left", got, err, want)
		}
	}
	if got, err := redisCLITLS(p.tlsAddr, certs, certs.ClientCertFile, certs.ClientKeyFile, "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING over TLS: %q, %v", got, err)
	}
	for name, cert := range map[string][2]string{"another CA's": {stranger.ClientCertFile, stranger.ClientKeyFile}, "no": {"", ""}} {
		if got, err := redisCLITLS(p.tlsAddr, certs, cert[0], cert[1], "PING"); err == nil && got == "PONG" {
			t.Errorf("%s client certificate: answered %q, want refused", name, got)
		}
	}
	host, port, _ := strings.Cut(p.tlsAddr, ":")
	if out, err := exec.Command("redis-cli", "-h", host, "-p", port, "PING").CombinedOutput(); err == nil && strings.TrimSpace(string(out)) == "PONG" {
		t.Error("plain RESP on the TLS port was answered PONG")
	}
	// Each refusal is a warning, the plain one last: awaited, not taken
	// for one logged after SIGTERM.
	for {
		if e, _ := p.next(t, refusedMsg)["error"].(string); strings.Contains(e, "does not look like a TLS handshake") {
			break
		}
	}
	stop(t, p)
}

// --cluster-tls with --cluster-user and --cluster-password: sluice reaches
// a cluster served only on TLS, as an ACL user, presenting --tls-cert-file
// and verifying the nodes with --tls-ca-cert-file; its decisions are the
// cluster's. A wrong password says so on starting.
func TestClusterTLS(t *testing.T) {
	requireRedisCLI(t)
	c := clustertest.New(t, clustertest.Config{Replicas: -1, TLS: true, User: "sluice", Password: "s3cret"})
	bin := binary(t)
	args := []string{"--listen", "127.0.0.1:0", "--cluster", strings.Join(c.Addrs(), ","), "--cluster-tls",
		"--tls-ca-cert-file", c.Certs.CAFile, "--tls-cert-file", c.Certs.CertFile, "--tls-key-file", c.Certs.KeyFile,
		"--cluster-user", c.User}
	p := start(t, bin, []string{"SLUICE_CLUSTER_PASSWORD=" + c.Password}, args...)
	checkFiveThenDenied(t, p.addr, "user:1")
	// Forwarding starts once sluice has read the cluster's command table.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := redisCLI(t, p.addr, "SET", "k", "v")
		if len(got) == 1 && got[0] == "OK" {
			break
		}
		if got[0] != "TRYAGAIN" || time.Now().After(deadline) {
			t.Fatalf("SET: %v", got)
		}
	}
	if got := redisCLI(t, p.addr, "GET", "k"); len(got) != 1 || got[0] != "v" {
		t.Errorf("GET: %v", got)
	}
	cl, err := rueidis.NewClient(c.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if n, err := cl.Do(ctx, cl.B().Exists().Key(router.KeyPrefix+"user:1").Build()).AsInt64(); err != nil || n != 1 {
		t.Errorf("the bucket in the cluster: EXISTS %d, %v, want 1", n, err)
	}
	stop(t, p)

	// Each of these waits out sluice's 2 s wait for the cluster before it
	// logs: run together, they take that once.
	tlsArgs := []string{"--log-format", "json", "--listen", "127.0.0.1:0", "--cluster", strings.Join(c.Addrs(), ","), "--cluster-tls",
		"--tls-ca-cert-file", c.Certs.CAFile, "--cluster-user", c.User, "--cluster-password", c.Password}
	other := clustertest.NewCerts(t)
	lines := logLines(t, bin, notReachable,
		[]string{"--log-format", "json", "--listen", "127.0.0.1:0", "--cluster", strings.Join(c.Addrs(), ",")},
		tlsArgs,
		append(slices.Clone(tlsArgs), "--tls-client-cert-file", other.ClientCertFile, "--tls-client-key-file", other.ClientKeyFile),
		append(append([]string{"--log-format", "json"}, args...), "--cluster-password", "bad-pass-7"))

	// Without --cluster-tls, the warning says what may be missing.
	if line := lines[0]; !strings.Contains(line, "--cluster-tls") {
		t.Errorf("plain connections to TLS-only nodes: %s; want a hint naming --cluster-tls", line)
	}

	// Nodes that verify clients' certificates (Redis's default) close a
	// connection that presents none, or one of another authority, once
	// the handshake is done: sluice sees their alert, or only a reset
	// (whichever comes first), and then the warning says what may be
	// missing.
	if line := lines[1]; !strings.Contains(line, "tls: certificate required") &&
		!(strings.Contains(line, "reset by peer") && strings.Contains(line, "--tls-client-cert-file")) {
		t.Errorf("no certificate presented to nodes that require one: %s; want the nodes' alert, or a reset with a hint naming --tls-client-cert-file", line)
	}
	if line := lines[2]; !strings.Contains(line, "tls: unknown certificate authority") &&
		!(strings.Contains(line, "reset by peer") && strings.Contains(line, "trust the certificate of --tls-client-cert-file")) {
		t.Errorf("a certificate the nodes' authority did not sign: %s; want the nodes' alert, or a reset with a hint that the nodes may not trust --tls-client-cert-file", line)
	}

	if line := lines[3]; !strings.Contains(line, "WRONGPASS") || strings.Contains(line, "bad-pass-7") {
		t.Errorf("with a wrong password: %s; want WRONGPASS, without the password", line)
	}
}

// logLine is the first line a sluice started with args logs that match
// accepts, or "" once it logs one that ends the wait (its start, for
// lines logged before it), or fails the test.
func logLine(t *testing.T, bin string, match func(string) (found, end bool), args ...string) string {
	t.Helper()
	return logLines(t, bin, match, args)[0]
}

// logLines is logLine of a sluice started with each of argSets, all run
// at once.
func logLines(t *testing.T, bin string, match func(string) (found, end bool), argSets ...[]string) []string {
	t.Helper()
	lines := make([]string, len(argSets))
	ended := make([]bool, len(argSets))
	var wg sync.WaitGroup
	for i, args := range argSets {
		cmd := exec.Command(bin, args...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		// Should the line never come, the process's end ends the scan.
		kill := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
		defer kill.Stop()
		wg.Go(func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				found, end := match(sc.Text())
				if found {
					lines[i] = sc.Text()
				}
				if found || end {
					ended[i] = true
					return
				}
			}
		})
	}
	wg.Wait()
	for i, args := range argSets {
		if !ended[i] {
			t.Fatalf("sluice %q logged no line awaited within 30 s", args)
		}
	}
	return lines
}

// notReachable matches the warning that the cluster is not reachable yet.
func notReachable(line string) (found, end bool) {
	return strings.Contains(line, "cluster not reachable yet"), false
}

// selfSigned writes a self-signed certificate valid from notBefore to
// notAfter, and its key, to dir.
func selfSigned(t *testing.T, dir string, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice"},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A certificate presented to the nodes that has expired (or is not yet
// valid) is named at start: the nodes' refusal of it shows under TLS 1.3
// only as a connection reset by peer, which does not say why.
func TestClusterTLSExpiredClientCert(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		from, to time.Time
		want     string
	}{
		{now.Add(-2 * time.Hour), now.Add(-time.Hour), "expired at"},
		{now.Add(time.Hour), now.Add(2 * time.Hour), "not valid before"},
		{now.Add(-time.Hour), now.Add(time.Hour), ""},
	} {
		cert, key := selfSigned(t, t.TempDir(), tt.from, tt.to)
		o := tlsOptions{cluster: true, clientCert: cert, clientKey: key}
		_, warning, err := o.clusterTLS(now)
		if err != nil || !strings.Contains(warning, tt.want) || (tt.want == "") != (warning == "") ||
			(warning != "" && !strings.Contains(warning, "--tls-client-cert-file")) {
			t.Errorf("certificate valid %v to %v: warning %q, %v; want one saying %q of --tls-client-cert-file", tt.from, tt.to, warning, err, tt.want)
		}
	}

	// And sluice logs it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := ln.Addr().String()
	ln.Close()
	cert, key := selfSigned(t, t.TempDir(), now.Add(-2*time.Hour), now.Add(-time.Hour))
	expired := func(line string) (found, end bool) {
		return strings.Contains(line, "expired at") && strings.Contains(line, `"level":"warn"`), strings.Contains(line, "sluice started")
	}
	if logLine(t, binary(t), expired, "--log-format", "json", "--listen", "127.0.0.1:0", "--cluster", nobody, "--cluster-tls",
		"--tls-client-cert-file", cert, "--tls-client-key-file", key) == "" {
		t.Fatal("sluice presenting an expired certificate to the nodes logged no warning before it started")
	}
}

// A node that closes sluice's connections unanswered gets a hint for what
// may be missing: --cluster-tls, a certificate, or one the nodes trust.
func TestClusterResetHint(t *testing.T) {
	withCert := &tls.Config{Certificates: []tls.Certificate{{}}}
	for _, tt := range []struct {
		o    tlsOptions
		cfg  *tls.Config
		want string
	}{
		{tlsOptions{}, nil, "--cluster-tls"},
		{tlsOptions{cluster: true}, &tls.Config{}, "tls-auth-clients yes, Redis's default)? then give --tls-client-cert-file"},
		{tlsOptions{cluster: true, clientCert: "c.crt", clientKey: "c.key"}, withCert, "trust the certificate of --tls-client-cert-file"},
		{tlsOptions{cluster: true, cert: "s.crt", key: "s.key"}, withCert, "trust the certificate of --tls-cert-file"},
	} {
		if got := tt.o.resetHint(tt.cfg); !strings.Contains(got, tt.want) {
			t.Errorf("%+v: hint %q, want it to say %q", tt.o, got, tt.want)
		}
	}
}
