package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// serveTLS serves cfg on a plain listener and a TLS one beside it, as
// --listen and --tls-listen do, and returns both addresses.
func serveTLS(t *testing.T, cfg proxy.Config, tc *tls.Config) (plain, secure string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln, tls.NewListener(tln, tc)) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), tln.Addr().String()
}

// serverTLS is a server's TLS configuration from certs, asking clients for
// a certificate as auth says.
func serverTLS(t *testing.T, certs *clustertest.Certs, auth tls.ClientAuthType) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certs.CertFile, certs.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: certs.Pool, ClientAuth: auth}
}

func newTLSGoRedis(t *testing.T, addr string, tc *tls.Config) *goredis.Client {
	tc.ServerName = "localhost"
	c := goredis.NewClient(&goredis.Options{Addr: addr, TLSConfig: tc, MaxRetries: -1, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// Clients on TLS and on plain RESP at once, from one server (the plain
// ones on the event loops, the TLS ones on goroutines): THROTTLE and a
// forwarded command work on both, decided by the cluster. With client
// certificates required, one of an unknown authority and none at all are
// refused; with them optional, only the unknown one is.
func TestTLSClients(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	certs, stranger := clustertest.NewCerts(t), clustertest.NewCerts(t)
	ctx := context.Background()

	plain, secure := serveTLS(t, proxy.Config{Decider: r, Forwarder: r}, serverTLS(t, certs, tls.RequireAndVerifyClientCert))
	for _, tt := range []struct {
		name string
		cl   *goredis.Client
	}{
		{"tls", newTLSGoRedis(t, secure, certs.ClientTLS())},
		{"plain", newGoRedis(t, plain)},
	} {
		key := "tls:" + tt.name
		if got := throttle(t, tt.cl, "THROTTLE", key, 2, 1, "1s"); got[0] != 0 {
			t.Errorf("%s: THROTTLE: got %v, want allowed", tt.name, got)
		}
		if err := tt.cl.Set(ctx, key, tt.name, 0).Err(); err != nil {
			t.Fatalf("%s: SET: %v", tt.name, err)
		}
		if got, err := tt.cl.Get(ctx, key).Result(); err != nil || got != tt.name {
			t.Errorf("%s: GET: got %q, %v, want %q", tt.name, got, err, tt.name)
		}
	}
	if got, fell := r.Decisions(router.SourceCluster), r.Decisions(router.SourceLocal); got != 2 || fell != 0 {
		t.Errorf("decisions: %d by the cluster and %d by the fallback, want 2 and 0", got, fell)
	}

	unknown := certs.ClientTLS()
	unknown.Certificates = []tls.Certificate{stranger.Client}
	none := certs.ClientTLS()
	none.Certificates = nil
	for _, tt := range []struct {
		name   string
		auth   tls.ClientAuthType
		client *tls.Config
		served bool
	}{
		{"required: unknown authority", tls.RequireAndVerifyClientCert, unknown, false},
		{"required: no certificate", tls.RequireAndVerifyClientCert, none, false},
		{"optional: unknown authority", tls.VerifyClientCertIfGiven, unknown, false},
		{"optional: no certificate", tls.VerifyClientCertIfGiven, none, true},
		{"optional: known", tls.VerifyClientCertIfGiven, certs.ClientTLS(), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, secure := serveTLS(t, proxy.Config{Decider: router.NewMemory(0)}, serverTLS(t, certs, tt.auth))
			got, err := newTLSGoRedis(t, secure, tt.client).Ping(ctx).Result()
			if tt.served && (err != nil || got != "PONG") {
				t.Fatalf("PING: got %q, %v, want PONG", got, err)
			}
			if !tt.served && err == nil {
				t.Fatalf("PING was answered %q, want the connection refused", got)
			}
			// A refused client takes nothing from the others.
			if got, err := newTLSGoRedis(t, secure, certs.ClientTLS()).Ping(ctx).Result(); err != nil || got != "PONG" {
				t.Fatalf("PING with a good certificate after it: got %q, %v", got, err)
			}
		})
	}
}

// tlsRouter is a router that reaches c with TLS and its credentials, and
// has read the command table.
func tlsRouter(t *testing.T, c *clustertest.Cluster, cfg router.ClusterConfig) *router.Cluster {
	t.Helper()
	cfg.Seeds, cfg.Timeout, cfg.HotThreshold = c.Addrs(), time.Second, -1
	r := newRouterConfig(t, cfg)
	waitRouter(t, r)
	return r
}

// clusterSession checks what goes to the nodes on every kind of
// connection sluice makes to them: bucket steps, forwarded commands, a
// blocking command (a connection of its own), WATCH (a pinned one) and
// SUBSCRIBE (a tunnel). The decisions must be
// the cluster's.
func clusterSession(t *testing.T, c *clustertest.Cluster, r *router.Cluster, addr, prefix string) {
	t.Helper()
	ctx := context.Background()
	before := r.Decisions(router.SourceCluster)
	cl := newGoRedis(t, addr)
	key := prefix + ":k"
	if got := throttle(t, cl, "THROTTLE", key, 2, 1, "1s"); got[0] != 0 {
		t.Errorf("THROTTLE: got %v, want allowed", got)
	}
	direct, err := rueidis.NewClient(c.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if n, err := direct.Do(ctx, direct.B().Exists().Key(router.KeyPrefix+key).Build()).AsInt64(); err != nil || n != 1 {
		t.Errorf("the bucket in the cluster: EXISTS %d, %v, want 1", n, err)
	}
	if got := r.Decisions(router.SourceCluster) - before; got != 1 || r.Decisions(router.SourceLocal) != 0 {
		t.Errorf("%d decisions by the cluster and %d by the fallback, want 1 and 0", got, r.Decisions(router.SourceLocal))
	}
	if err := cl.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := cl.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Errorf("GET: got %q, %v", got, err)
	}
	watch := dialRaw(t, addr)
	if got := watch.do("BLPOP", prefix+":list", "0.05"); got != "*-1\r\n" {
		t.Errorf("BLPOP on an empty list: %q, want a null array", got)
	}
	for _, cmd := range [][]string{{"WATCH", key}, {"MULTI"}, {"SET", key, "w"}} {
		if got := watch.do(cmd...); got[0] != '+' {
			t.Fatalf("%q: %q", cmd, got)
		}
	}
	if got := watch.do("EXEC"); got != "*1\r\n+OK\r\n" {
		t.Errorf("EXEC: %q", got)
	}
	sub := dialRaw(t, addr)
	if got := sub.do("SUBSCRIBE", prefix); !strings.HasPrefix(got, "*3\r\n$9\r\nsubscribe\r\n") {
		t.Fatalf("SUBSCRIBE: %q", got)
	}
	// The count is of the publishing node's subscribers only.
	if err := cl.Publish(ctx, prefix, "hi").Err(); err != nil {
		t.Fatalf("PUBLISH: %v", err)
	}
	if got := sub.read(); !strings.HasSuffix(got, "$2\r\nhi\r\n") {
		t.Errorf("the message: %q", got)
	}
}

// sluice in front of a cluster served only on TLS, whose clients
// authenticate as an ACL user (--cluster-tls, --cluster-user,
// --cluster-password): every kind of connection works, from the event
// loops (which leave their own connections to rueidis then) and from
// goroutines.
func TestTLSToTheCluster(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, TLS: true, User: "sluice", Password: "s3cret"})
	r := tlsRouter(t, c, router.ClusterConfig{TLS: c.Certs.ClientTLS(), Username: c.User, Password: c.Password})
	eachSession(t, c, r)
}

// eachSession runs clusterSession through a server with event loops and
// one with a goroutine per client.
func eachSession(t *testing.T, c *clustertest.Cluster, r *router.Cluster) {
	for _, m := range []struct {
		name  string
		loops int
	}{{"loops", 0}, {"goroutines", -1}} {
		t.Run(m.name, func(t *testing.T) {
			clusterSession(t, c, r, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: m.loops}), t.Name())
		})
	}
}

// A password without TLS: the event loops' own connections to the nodes
// authenticate too (AUTH before anything else). A password the nodes no
// longer take is a clear error on the commands that needed a new
// connection, and on connecting.
func TestClusterPassword(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, Password: "s3cret"})
	r := tlsRouter(t, c, router.ClusterConfig{Password: c.Password})
	eachSession(t, c, r)

	t.Run("CONFIG GET hides the cluster's credentials", func(t *testing.T) {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, AllowAdmin: true}))
		for _, proto := range []string{"2", "3"} {
			conn.do("HELLO", proto)
			got := conn.do("CONFIG", "GET", "requirepass")
			if strings.Contains(got, "s3cret") || !strings.Contains(got, "requirepass\r\n$0\r\n\r\n") {
				t.Errorf("RESP%s: CONFIG GET requirepass: %q, want it empty", proto, got)
			}
			if got := conn.do("CONFIG", "GET", "masterauth", "maxmemory-policy"); strings.Contains(got, "s3cret") || !strings.Contains(got, "noeviction") {
				t.Errorf("RESP%s: CONFIG GET masterauth maxmemory-policy: %q, want masterauth empty and the policy shown", proto, got)
			}
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		bad := router.NewCluster(router.ClusterConfig{Seeds: c.Addrs(), Password: "wrong"})
		t.Cleanup(bad.Close)
		// WaitConnected reports the last attempt's error once its context
		// ends: a second each time, until an attempt was refused (a slow
		// machine's handshake may take that long, or time out first), for
		// up to 10s.
		var err error
		for range 10 {
			wctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = bad.WaitConnected(wctx)
			cancel()
			if err == nil || strings.Contains(err.Error(), "WRONGPASS") {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("connecting with a wrong password: %v, want WRONGPASS", err)
		}

		// The nodes change their password: connections made before go on,
		// a loop's new one is refused.
		for _, n := range c.Nodes {
			if err := n.Do(context.Background(), "CONFIG", "SET", "requirepass", "changed").Error(); err != nil {
				t.Fatal(err)
			}
		}
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
		if got := conn.do("GET", "tls:k"); !strings.HasPrefix(got, "-ERR sluice: connection to ") || !strings.Contains(got, "AUTH") || !strings.Contains(got, "WRONGPASS") {
			t.Errorf("GET on a new connection: %q, want the node's refusal of AUTH", got)
		} else if strings.Contains(got, "s3cret") {
			t.Errorf("the error shows the password: %q", got)
		}
	})
}

// A client that connects to the TLS port and never handshakes is closed
// after the handshake bound, and its place under --maxclients goes to the
// next; one turned away past --maxclients is turned away off the
// accepting goroutine, so a silent one holds up no other.
func TestTLSSilentClients(t *testing.T) {
	proxy.SetHandshakeTimeout(t.Cleanup, 300*time.Millisecond)
	certs := clustertest.NewCerts(t)
	ctx := context.Background()
	_, secure := serveTLS(t, proxy.Config{Decider: router.NewMemory(0), MaxClients: 1}, serverTLS(t, certs, tls.RequireAndVerifyClientCert))

	silent, _ := raw(t, secure)
	if _, err := silent.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a client that never handshakes: read %v, want it closed by sluice", err)
	}
	good := newTLSGoRedis(t, secure, certs.ClientTLS())
	waitUntil(t, "a client served once the silent one is gone", func() bool { return good.Ping(ctx).Err() == nil })

	// good holds the only place: a silent one past it, then another client.
	silent, _ = raw(t, secure)
	defer silent.Close()
	tc := certs.ClientTLS()
	tc.ServerName = "localhost"
	other, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", secure, tc)
	if err != nil {
		t.Fatalf("a client past --maxclients behind a silent one: %v", err)
	}
	defer other.Close()
	other.SetDeadline(time.Now().Add(3 * time.Second))
	if line, err := bufio.NewReader(other).ReadString('\n'); line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("a client past --maxclients behind a silent one: %q, %v, want ERR max number of clients reached", line, err)
	}
}

// With --timeout shorter than the handshake bound, a client that connects
// to the TLS port and says nothing is closed after --timeout, as one on
// the plain port is.
func TestTLSSilentClientsIdleTimeout(t *testing.T) {
	t.Parallel() // it waits on the clock, not the CPU: alongside the others that do
	certs := clustertest.NewCerts(t)
	plain, secure := serveTLS(t, proxy.Config{Decider: router.NewMemory(0), IdleTimeout: 300 * time.Millisecond},
		serverTLS(t, certs, tls.RequireAndVerifyClientCert))
	for _, addr := range []string{plain, secure} {
		silent, _ := raw(t, addr)
		// The idle sweep looks once a second; the handshake bound is 10 s.
		silent.SetReadDeadline(time.Now().Add(4 * time.Second))
		start := time.Now()
		if _, err := silent.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("%s: a silent client after %v: %v, want it closed by sluice", addr, time.Since(start), err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dialRawTLS is dialRaw over TLS.
func dialRawTLS(t *testing.T, addr string, tc *tls.Config) *rawConn {
	t.Helper()
	tc.ServerName = "localhost"
	c, err := tls.Dial("tcp", addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// A TLS client (served on a goroutine) subscribes as one on a loop does:
// messages come after the replies to what it sent before, in RESP2's
// subscribed mode and as RESP3 pushes; it is never idle while subscribed;
// and it leaves no subscription behind when it goes away.
func TestTLSSubscriber(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	certs := clustertest.NewCerts(t)
	cfg := proxy.Config{Decider: r, Forwarder: r, IdleTimeout: 300 * time.Millisecond}
	_, secure := serveTLS(t, cfg, serverTLS(t, certs, tls.RequireAndVerifyClientCert))

	sub := dialRawTLS(t, secure, certs.ClientTLS())
	sub.send([]string{"SET", "tls:sub", "v"}, []string{"SUBSCRIBE", "tch"}, []string{"PING", "p"})
	for _, want := range []string{"+OK\r\n", "*3\r\n$9\r\nsubscribe\r\n$3\r\ntch\r\n:1\r\n", "*2\r\n$4\r\npong\r\n$1\r\np\r\n"} {
		if got := sub.read(); got != want {
			t.Fatalf("SET, SUBSCRIBE, PING: %q, want %q", got, want)
		}
	}
	if got := sub.do("GET", "tls:sub"); !strings.HasPrefix(got, "-ERR Can't execute 'get'") {
		t.Errorf("GET while subscribed (RESP2): %q, want Redis's refusal", got)
	}
	sub3 := dialRawTLS(t, secure, certs.ClientTLS())
	sub3.do("HELLO", "3")
	if got := sub3.do("SUBSCRIBE", "tch"); got != ">3\r\n$9\r\nsubscribe\r\n$3\r\ntch\r\n:1\r\n" {
		t.Fatalf("RESP3 SUBSCRIBE: %q", got)
	}

	// An idle client that did not subscribe is closed; the subscribers,
	// as idle, are not.
	idle := dialRawTLS(t, secure, certs.ClientTLS())
	idle.do("PING")
	if _, err := idle.br.ReadByte(); err == nil {
		t.Fatal("an idle client got bytes, want it closed")
	}
	pub := dialRawTLS(t, secure, certs.ClientTLS())
	pub.do("PUBLISH", "tch", "hi")
	if got, want := sub.read(), "*3\r\n$7\r\nmessage\r\n$3\r\ntch\r\n$2\r\nhi\r\n"; got != want {
		t.Errorf("message: %q, want %q", got, want)
	}
	if got, want := sub3.read(), ">3\r\n$7\r\nmessage\r\n$3\r\ntch\r\n$2\r\nhi\r\n"; got != want {
		t.Errorf("RESP3 message: %q, want %q", got, want)
	}
	if got := sub3.do("GET", "tls:sub"); got != "$1\r\nv\r\n" {
		t.Errorf("RESP3 GET while subscribed: %q", got)
	}

	// Unsubscribed, the RESP2 client's commands are served again.
	if got := sub.do("UNSUBSCRIBE"); got != "*3\r\n$11\r\nunsubscribe\r\n$3\r\ntch\r\n:0\r\n" {
		t.Errorf("UNSUBSCRIBE: %q", got)
	}
	if got := sub.do("GET", "tls:sub"); got != "$1\r\nv\r\n" {
		t.Errorf("GET after UNSUBSCRIBE: %q", got)
	}
	// QUIT while subscribed: answered, then closed.
	if got := sub.do("SUBSCRIBE", "tch"); got != "*3\r\n$9\r\nsubscribe\r\n$3\r\ntch\r\n:1\r\n" {
		t.Errorf("SUBSCRIBE again: %q", got)
	}
	if got := sub.do("QUIT"); got != "+OK\r\n" {
		t.Errorf("QUIT while subscribed: %q", got)
	}
	if _, err := sub.br.ReadByte(); err == nil {
		t.Error("a subscriber got bytes after QUIT, want it closed")
	}
	sub3.c.Close()
	// Not on pub: idle since its PUBLISH, it may be past --timeout by now
	// on a loaded machine.
	check := dialRawTLS(t, secure, certs.ClientTLS())
	waitUntil(t, "the subscribers that went away left no subscription", func() bool {
		return check.do("PUBSUB", "NUMSUB", "tch") == "*2\r\n$3\r\ntch\r\n:0\r\n"
	})
}

// A TLS client (served on its own goroutine) that goes away during a
// BLPOP ends the wait at the node, close_notify and all, and the element
// pushed next is left for others.
func TestTLSBlockedClientHangsUp(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	certs := clustertest.NewCerts(t)
	_, secure := serveTLS(t, proxy.Config{Decider: r, Forwarder: r}, serverTLS(t, certs, tls.RequireAndVerifyClientCert))
	blocked := blpopWaiters(t, c, "tls:bl")
	waiter := dialRawTLS(t, secure, certs.ClientTLS())
	waiter.send([]string{"BLPOP", "tls:bl", "0"})
	waitUntil(t, "the BLPOP waits at the node", func() bool { return blocked() == 1 })
	waiter.c.Close()
	waitUntil(t, "no BLPOP waits at the node once its client left", func() bool { return blocked() == 0 })
	other := dialRawTLS(t, secure, certs.ClientTLS())
	other.do("RPUSH", "tls:bl", "x")
	if got := other.do("LLEN", "tls:bl"); got != ":1\r\n" {
		t.Errorf("LLEN after the waiter left: %q, want :1", got)
	}
}

// With --listen and --tls-listen both served, a cluster-mode client is
// told the port of the listener it reached, as a Redis 7.0 node with
// tls-port and port tells a TLS client its TLS port and a plain one its
// plain port: a TLS cluster client must not be sent to the plain port.
func TestClusterTLSListener(t *testing.T) {
	certs := clustertest.NewCerts(t)
	ctx := context.Background()
	plain, secure := serveTLS(t, proxy.Config{Decider: router.NewMemory(0)}, serverTLS(t, certs, tls.RequireAndVerifyClientCert))
	_, plainPort, _ := net.SplitHostPort(plain)
	_, securePort, _ := net.SplitHostPort(secure)

	for _, tt := range []struct {
		name, port string
		conn       *rawConn
	}{
		{"plain", plainPort, dialRaw(t, plain)},
		{"tls", securePort, dialRawTLS(t, secure, certs.ClientTLS())},
	} {
		id := tt.conn.do("CLUSTER", "MYID")
		if got, want := tt.conn.do("CLUSTER", "SLOTS"), "*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:"+tt.port+"\r\n"+id+"*0\r\n"; got != want {
			t.Errorf("%s: CLUSTER SLOTS:\n got %q\nwant %q", tt.name, got, want)
		}
		if got, want := tt.conn.do("CLUSTER", "SHARDS"), "$4\r\nport\r\n:"+tt.port+"\r\n"; !strings.Contains(got, want) {
			t.Errorf("%s: CLUSTER SHARDS: got %q, want it to hold %q", tt.name, got, want)
		}
		if got, want := tt.conn.do("CLUSTER", "NODES"), " 127.0.0.1:"+tt.port+"@0 myself,master "; !strings.Contains(got, want) {
			t.Errorf("%s: CLUSTER NODES: got %q, want it to hold %q", tt.name, got, want)
		}
	}
	if a, b := dialRaw(t, plain).do("CLUSTER", "MYID"), dialRawTLS(t, secure, certs.ClientTLS()).do("CLUSTER", "MYID"); a != b {
		t.Errorf("CLUSTER MYID: %q on the plain listener, %q on TLS: one node has one ID", a, b)
	}

	tc := certs.ClientTLS()
	tc.ServerName = "localhost"
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{secure}, TLSConfig: tc, MaxRedirects: -1, DialTimeout: 2 * time.Second})
	defer c.Close()
	var seen []string
	err := c.ForEachShard(ctx, func(ctx context.Context, shard *goredis.Client) error {
		seen = append(seen, shard.Options().Addr)
		return nil
	})
	if err != nil || len(seen) != 1 || seen[0] != secure {
		t.Fatalf("go-redis shards over TLS: got %v, %v, want [%s]", seen, err, secure)
	}
	got, err := c.Do(ctx, "THROTTLE", "tls", 10, 1, "1s").Int64Slice()
	if err != nil || !eq(got, []int64{0, 10, 9, -1, 1000}) {
		t.Fatalf("THROTTLE over TLS through the cluster client: got %v, %v", got, err)
	}
}
