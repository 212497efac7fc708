package proxy_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// With --read-from-replicas, a client that sends READWRITE reads its own
// writes again, from the primaries, as on a Redis Cluster connection;
// READONLY, and RESET (a new connection's state), send its reads to the
// replicas again. A replica kept from applying its primary's stream
// (CLIENT PAUSE WRITE) tells which node answered: it still has the old
// value. Both serving paths.
func TestReviewClprotoReadWriteReadsThePrimary(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	ctx := context.Background()
	const key = "{clproto}k"
	primary := primaryOf(t, c, key)
	replica := replicasOf(t, c, primary)[0]
	gets := func() int { return cmdCalls(replica, "get") }
	conns := onEachPath(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true, HotThreshold: -1})
	if got := conns[1].do("SET", key, "old"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	// The routers learn the replica from the slot map, which it may join
	// after the cluster formed, and it lags its primary.
	for _, rc := range conns {
		before := gets()
		waitUntil(t, "a GET reaches the replica, which has the write", func() bool {
			return rc.do("GET", key) == "$3\r\nold\r\n" && gets() > before
		})
	}
	if err := replica.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Do(context.Background(), "CLIENT", "UNPAUSE") })
	for loops, rc := range conns {
		v := "new" + strconv.Itoa(loops)
		if got := rc.do("READWRITE"); got != "+OK\r\n" {
			t.Fatalf("loops %d: READWRITE: %q", loops, got)
		}
		if got := rc.do("SET", key, v); got != "+OK\r\n" {
			t.Fatalf("loops %d: SET: %q", loops, got)
		}
		if got, want := rc.do("GET", key), "$"+strconv.Itoa(len(v))+"\r\n"+v+"\r\n"; got != want {
			t.Errorf("loops %d: GET after READWRITE and SET: %q, want %q", loops, got, want)
		}
		if got := rc.do("READONLY"); got != "+OK\r\n" {
			t.Fatalf("loops %d: READONLY: %q", loops, got)
		}
		if got := rc.do("GET", key); got != "$3\r\nold\r\n" {
			t.Errorf("loops %d: GET after READONLY, from the lagging replica: %q", loops, got)
		}
		rc.do("READWRITE")
		if got := rc.do("RESET"); got != "+RESET\r\n" {
			t.Fatalf("loops %d: RESET: %q", loops, got)
		}
		if got := rc.do("GET", key); got != "$3\r\nold\r\n" {
			t.Errorf("loops %d: GET after RESET, from the lagging replica: %q", loops, got)
		}
	}
}
