package router

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// With TLS to the nodes, a node that takes the connection but never
// answers the handshake (paused, hung) times the dial out with Go's bare
// context error, which errors.Is takes for a call's deadline: the shard's
// error then said "no reply within the timeout (50ms)", the backend
// timeout, for a dial bounded by its own. It names the dial and the
// address, as a plain connection's dial timeout does
// (TestDialTimeoutFaultKeepsItsError).
func TestTLSHandshakeTimeoutFaultKeepsItsError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	s := &shard{addr: addr}
	s.healthy.Store(true)
	c := &Cluster{cfg: ClusterConfig{Timeout: 50 * time.Millisecond, TLS: &tls.Config{InsecureSkipVerify: true}},
		log: zap.NewNop(), ctx: context.Background(), shards: map[string]*shard{addr: s}}
	if _, _, err := c.dial(addr, false, false, 512, 100*time.Millisecond); err == nil {
		t.Fatal("a handshake nothing answers succeeded")
	}
	if s.healthy.Load() || strings.Contains(s.lastErr, "no reply within") || !strings.Contains(s.lastErr, addr) || s.kinds["timeout"] != 1 {
		t.Fatalf("after a handshake timeout: healthy %v, last error %q, kinds %v; want unhealthy, the dial's error naming %s, one timeout",
			s.healthy.Load(), s.lastErr, s.kinds, addr)
	}
}
