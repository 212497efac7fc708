//go:build linux

package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// TestIdleBlockingConnClosedByNodeIsLetGo has the node close a connection
// sluice keeps idle for blocking commands, as a primary demoted by a
// failover closes those it answered UNBLOCKED. sluice found it closed
// only when it next took it for the same node, which a demoted node
// never gets again while it is a replica: the socket stayed in
// CLOSE-WAIT, an fd held for each such connection, for as long.
func TestIdleBlockingConnClosedByNodeIsLetGo(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r})
	k := "{idleclosed}"
	node := primaryOf(t, c, k)
	_, p, _ := strings.Cut(node.Addr, ":")
	port, _ := strconv.Atoi(p)
	node.Do(ctx, "RPUSH", k, "x")
	if got := dialRaw(t, addr).do("BLPOP", k, "0"); !strings.Contains(got, "x") {
		t.Fatalf("BLPOP: %q", got)
	}
	list, err := node.Do(ctx, "CLIENT", "LIST").ToString()
	if err != nil {
		t.Fatal(err)
	}
	killed := false
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " cmd=blpop ") {
			id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
			if err := node.Do(ctx, "CLIENT", "KILL", "ID", id).Error(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	if !killed {
		t.Fatalf("no blocking connection on the node:\n%s", list)
	}
	waitUntil(t, "the node's end reaches sluice", func() bool { return closeWaits(t, port) > 0 })
	waitUntil(t, "sluice closes its side", func() bool { return closeWaits(t, port) == 0 })
}

// closeWaits counts the connections to port that the peer ended and this
// process has not closed (CLOSE-WAIT).
func closeWaits(t *testing.T, port int) int {
	t.Helper()
	n := 0
	for _, s := range tcpSockets(t, false) {
		if s.state == "08" && s.remote == port {
			n++
		}
	}
	return n
}
