package router

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
)

// A new connection that times out connecting (the forwarding and
// blocking paths' dial, bounded by its own second or --forward-timeout)
// is not a call past the backend timeout: the shard's error names the
// dial and its address, not "no reply within the timeout (50ms)". Go's
// dial timeout matches context.DeadlineExceeded under errors.Is.
func TestDialTimeoutFaultKeepsItsError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, derr := (&net.Dialer{Deadline: time.Now().Add(-time.Second)}).Dial("tcp", addr)
	if derr == nil {
		t.Fatal("a dial past its deadline connected")
	}
	s := &shard{addr: addr}
	s.healthy.Store(true)
	c := &Cluster{cfg: ClusterConfig{Timeout: 50 * time.Millisecond}, log: zap.NewNop(), ctx: context.Background(),
		shards: map[string]*shard{addr: s}}
	c.unreachable(addr, derr)
	if s.healthy.Load() || s.lastErr != derr.Error() || s.kinds["timeout"] != 1 {
		t.Fatalf("after a dial timeout: healthy %v, last error %q, kinds %v; want unhealthy, %q, one timeout",
			s.healthy.Load(), s.lastErr, s.kinds, derr.Error())
	}
}
