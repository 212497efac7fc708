package proxy_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A paused primary of a TLS cluster, before sluice has a connection to
// it: the TLS handshake meets the hung node, and nothing is written. A
// command for it answers CLUSTERDOWN, as when a plain connection's AUTH
// or HELLO meets it, on both paths. (The handshake's deadline answered
// ERR: not retried, as if the command might have run.)
func TestHungTLSHandshakeIsClusterDown(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, PartialCoverage: true, TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	victim := c.Nodes[0]
	key := nameOn(t, c, victim, "k")
	r := tlsRouter(t, c, router.ClusterConfig{TLS: c.Certs.ClientTLS()})
	cls := pathClients(t, ctx, r, goredis.Options{MaxRetries: -1, ReadTimeout: 15 * time.Second})
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	defer victim.Resume()
	// At once on both paths: each waits out the router's 1 s handshake
	// timeout.
	errs := make([]error, len(cls))
	var wg sync.WaitGroup
	for i, cl := range cls {
		wg.Go(func() { errs[i] = cl.Get(ctx, key).Err() })
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN sluice: connection to "+victim.Addr+" failed") {
			t.Errorf("path %d: GET on the paused TLS primary: %v, want sluice's CLUSTERDOWN", i, err)
		}
	}
}
