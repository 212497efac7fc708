package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A client that CLIENT LIST flags b (or INFO's blocked_clients counts)
// has its command at the node: a writer that waits for it, as Redis's own
// tests do, then adds to the stream, has its entry read by an XREAD BLOCK
// of $, never resolved after the add. Here the command's connection is
// still being opened (its HELLO 3 held by a CLIENT PAUSE of the node)
// when the writer looks.
func TestReviewStreamsBlockedFlagMeansAtNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	node := primaryOf(t, c, "{sr}s")
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r})
	admin := dialRaw(t, addr)
	if got := admin.do("XADD", "{sr}s", "1-1", "f", "v"); got != "$3\r\n1-1\r\n" {
		t.Fatalf("XADD: %q", got)
	}
	v := dialRaw(t, addr)
	v.do("HELLO", "3")
	id := strings.TrimSuffix(strings.TrimPrefix(v.do("CLIENT", "ID"), ":"), "\r\n")
	if got := dialRaw(t, node.Addr).do("CLIENT", "PAUSE", "300", "ALL"); got != "+OK\r\n" {
		t.Fatalf("CLIENT PAUSE: %q", got)
	}
	v.send([]string{"XREAD", "BLOCK", "0", "STREAMS", "{sr}s", "$"})
	waitUntil(t, "the client blocks", func() bool {
		_, flags, _ := strings.Cut(clientLine(t, admin.do("CLIENT", "LIST", "ID", id)), " flags=")
		flags, _, _ = strings.Cut(flags, " ")
		return strings.Contains(flags, "b")
	})
	if got := admin.do("XADD", "{sr}s", "2-1", "f", "w"); got != "$3\r\n2-1\r\n" {
		t.Fatalf("XADD: %q", got)
	}
	v.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if got, want := v.read(), "%1\r\n$5\r\n{sr}s\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nf\r\n$1\r\nw\r\n"; got != want {
		t.Errorf("XREAD BLOCK answered %q, want %q", got, want)
	}
}
