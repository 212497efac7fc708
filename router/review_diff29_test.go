package router

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// A node taken out of the cluster answers CLUSTER SLOTS with no slot; when
// the cluster's own nodes fail that reading, its empty map is no more the
// cluster's than when they answer: the reading fails, and the map it
// would have emptied (every shard forgotten, every command CLUSTERDOWN)
// stays, marked stale. Before, whether the empty map was believed
// depended on the order the nodes were asked in: it was, when the
// removed node came last.
func TestReviewDiff29EmptyAnswerAfterAFailureIsNotTheMap(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	// The removed node: in cluster mode, owning no slot. The failing
	// one: a Redis without cluster support, whose CLUSTER SLOTS is an
	// error, as a cluster node's is when it cannot answer.
	removed := diff29Node(t, "--cluster-enabled", "yes")
	failing := diff29Node(t)
	nodes := map[string]rueidis.Client{removed.addr: removed.client, failing.addr: failing.client}
	for i := range 40 { // both orders, each with a probability of 1 - 2^-40
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		ranges, from, err := readSlots(ctx, removed.client, nodes, nil, nil, time.Second)
		cancel()
		if err == nil {
			t.Fatalf("reading %d: %d ranges from %s, no error; want the failing node's error", i, len(ranges), from)
		}
	}
	// Every node answering no slot is an empty cluster: that is believed.
	other := diff29Node(t, "--cluster-enabled", "yes")
	nodes = map[string]rueidis.Client{removed.addr: removed.client, other.addr: other.client}
	for i := range 10 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		ranges, _, err := readSlots(ctx, removed.client, nodes, nil, nil, time.Second)
		cancel()
		if err != nil || len(ranges) != 0 {
			t.Fatalf("reading %d of an empty cluster: %d ranges, %v", i, len(ranges), err)
		}
	}
}

type diff29Server struct {
	addr   string
	client rueidis.Client
}

func diff29Node(t *testing.T, args ...string) diff29Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	srv := exec.Command("redis-server", append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir}, args...)...)
	srv.SysProcAttr = clustertest.DieWithParent()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(5 * time.Second); ; {
		client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true, DisableRetry: true})
		if err == nil {
			t.Cleanup(client.Close)
			return diff29Server{addr, client}
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
