package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
	"github.com/sluice-rl/sluice/router/slot"
)

// A client that pipelines THROTTLEs of one bucket while the bucket's slot
// moves to another primary (SETSLOT NODE) sees its remaining fall by one
// per reply, as on a slot that does not move: a call sent to the old
// owner and redirected must not be overtaken by a later one that sluice's
// new slot map sends to the new owner directly (on the loops, 4 runs of
// 4 saw remaining jump back up within 8 moves). Both serving paths.
func TestThrottleOrderAcrossTheEndOfASlotMove(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		throttleOrderAcrossMoves(t, c, r, cfg)
	})
}

func throttleOrderAcrossMoves(t *testing.T, c *clustertest.Cluster, r *router.Cluster, cfg proxy.Config) {
	ctx := context.Background()
	key := "{slotend" + strconv.Itoa(cfg.Loops) + "}k"
	const capacity = 100_000 // far from empty; refilled one an hour: never
	conn := dialRaw(t, serveConfig(t, cfg))
	cmd := router.AppendCommand(nil, [][]byte{[]byte("THROTTLE"), []byte(key), []byte(strconv.Itoa(capacity)), []byte("1"), []byte("1h")})
	const window = 64 // calls sent, not yet answered
	var (
		stop     atomic.Bool
		answered atomic.Int64
		wg       sync.WaitGroup
		failure  atomic.Pointer[string]
	)
	room := make(chan struct{}, window)
	dead := make(chan struct{})
	conn.c.SetDeadline(time.Now().Add(30 * time.Second))
	wg.Go(func() { // the reader
		defer close(dead)
		want := int64(capacity - 1)
		for range room {
			b, err := reply.Read(conn.br, nil)
			var remaining int64
			if err == nil {
				var limit, allowed, retry, reset int64
				_, err = fmt.Sscanf(string(b), "*5\r\n:%d\r\n:%d\r\n:%d\r\n:%d\r\n:%d\r\n", &allowed, &limit, &remaining, &retry, &reset)
			}
			if err != nil || remaining != want {
				msg := fmt.Sprintf("call %d answered %q (%v), want remaining %d", capacity-1-want, b, err, want)
				failure.Store(&msg)
				return
			}
			want--
			answered.Add(1)
		}
	})
	wg.Go(func() { // the writer
		defer close(room)
		for !stop.Load() {
			select {
			case room <- struct{}{}:
			case <-dead:
				return
			}
			if _, err := conn.c.Write(cmd); err != nil {
				return
			}
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()
	// Twice the window answered: what was in flight before is.
	settled := func() {
		at := answered.Load()
		waitUntil(t, "the calls in flight are answered", func() bool {
			return answered.Load() >= at+2*window || failure.Load() != nil
		})
	}
	settled()
	sl := slot.Of(key)
	for i := range 8 {
		from := primaryOf(t, c, key)
		to := c.Nodes[(i+1)%len(c.Nodes)]
		if to == from {
			to = c.Nodes[(i+2)%len(c.Nodes)]
		}
		if err := c.MoveSlot(ctx, sl, to); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "sluice's slot map has the move", func() bool {
			routed := []router.Forward{{Slot: sl}}
			r.Route(routed)
			return routed[0].Addr == to.Addr
		})
		settled()
		if m := failure.Load(); m != nil {
			t.Fatalf("move %d: %s", i+1, *m)
		}
	}
	stop.Store(true)
	wg.Wait()
	if m := failure.Load(); m != nil {
		t.Fatal(*m)
	}
}
