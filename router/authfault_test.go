package router

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// The nodes' password changes under sluice (rotated on the nodes, not yet
// in --cluster-password): a connection made after is refused, WRONGPASS
// (or NOAUTH). The shard cannot decide: its keys go to the fallback, as a
// node that cannot be reached sends them, and are not answered the node's
// refusal of sluice's password, which a client would take for a refusal
// of its own.
func TestPasswordChangedUnderSluice(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "TLS"}[tlsOn], func(t *testing.T) { passwordChanged(t, tlsOn) })
	}
}

func passwordChanged(t *testing.T, tlsOn bool) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1, Password: "s3cret", TLS: tlsOn})
	cfg := ClusterConfig{Seeds: c.Addrs(), Password: c.Password, Timeout: 100 * time.Millisecond}
	if tlsOn {
		cfg.TLS = c.Certs.ClientTLS()
	}
	r := NewCluster(cfg)
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	iv, err := bucket.Limit{Capacity: 1000, Refill: 100, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	decide := func() Result {
		res := make([]Result, 1)
		r.Decide(context.Background(), []Request{{Key: "pw", Interval: iv, Cost: 1}}, res)
		return res[0]
	}
	if res := decide(); res.Err != nil || res.Source != SourceCluster {
		t.Fatalf("before the change: %+v, want a decision of the cluster", res)
	}

	// On one connection: the password changes, then every other client's
	// connection is closed (sluice's too, which then reconnect).
	for _, n := range c.Nodes {
		var conn net.Conn
		if tlsOn {
			conn, err = tls.Dial("tcp", n.Addr, c.Certs.ClientTLS())
		} else {
			conn, err = net.Dial("tcp", n.Addr)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte("AUTH s3cret\r\nCONFIG SET requirepass rotated\r\nCLIENT KILL TYPE normal SKIPME yes\r\n")); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		for _, want := range []string{"+OK", "+OK", ":"} {
			if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, want) {
				t.Fatalf("%s: %q, %v; want %s", n.Addr, line, err, want)
			}
		}
	}
	// Until the shard's node client has seen its connection closed, a
	// call on it fails on the closed connection: wait until it dials a
	// new one, and the node refuses it.
	s := r.topo.Load().owner(slot.Of(KeyPrefix + "pw"))
	node := r.nodeOr(s, *r.client.Load())
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := node.Do(context.Background(), node.B().Ping().Build()).Error()
		if err != nil && strings.Contains(err.Error(), "WRONGPASS") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node client still answers %v, want the node's WRONGPASS", err)
		}
	}
	if res := decide(); res.Err != nil || res.Source != SourceLocal {
		t.Fatalf("after the change: %+v; want a fallback decision", res)
	}
	if s.healthy.Load() {
		t.Error("the shard refusing sluice's password is still healthy")
	}
}
