package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
)

// A manual failover leaves the demoted primary in the cluster, a replica
// of the promoted one: PUBLISH still reaches it over the bus, and Redis
// keeps its subscribers. The other nodes learn of the promotion at once
// (the new primary broadcasts it) but of the demotion only when the old
// primary next pings them, up to half a node timeout later; a slot map
// read from one of them meanwhile names the old primary nowhere. Its
// subscribers must not be ended for that. (A node timeout of 3 s keeps
// that window open long enough for the slot maps read every 20 ms to meet
// it: ending them was caught in 5 runs of 5, against 5 of 7 at 1 s.)
func TestSubscriberOnADemotedPrimaryStays(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{NodeTimeout: 3 * time.Second})
	ctx := context.Background()
	const ch = "{demoted}ch"
	conns, _, promoted := subscribedThenFailedOver(t, c, ch, router.ClusterConfig{Seeds: c.Addrs(), TopologyInterval: 20 * time.Millisecond})
	for i := range 20 {
		if err := promoted.Do(ctx, "PUBLISH", ch, "m").Error(); err != nil {
			t.Fatal(err)
		}
		for loops, rc := range conns {
			rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			r, err := reply.Read(rc.br, nil)
			if err != nil || !strings.Contains(string(r), "$1\r\nm\r\n") {
				t.Fatalf("loops %d: message %d after the failover: %q, %v", loops, i, r, err)
			}
		}
		time.Sleep(50 * time.Millisecond) // lets the router read a few slot maps between messages
	}
}
