package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// A client's pipelined writes to a key land in the order it sent them
// while the key's slot moves to another primary: a command routed by the
// old slot map is redirected to the new owner, where one routed by the
// new map must not overtake it (on the loops, 5 of 6 lists came out of
// order). Each move waits until sluice's slot map has it and what was in
// flight across it is answered: a slot that moves again while commands
// still bounce between its owners is another matter (README). Both
// serving paths.
func TestPassthroughOrderAcrossASlotMove(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{1, -1} {
		orderAcrossMoves(t, c, r, loops)
	}
}

// orderAcrossMoves moves the slot of the keys that clients pipeline
// RPUSHes to four times, and checks each list's order.
func orderAcrossMoves(t *testing.T, c *clustertest.Cluster, r *router.Cluster, loops int) {
	ctx := context.Background()
	tag := "{moveorder" + strconv.Itoa(loops+1) + "}"
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
	const clients, window = 4, 30
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		answers [clients]atomic.Int64
	)
	defer func() { stop.Store(true); wg.Wait() }() // a Fatal below too
	for ci := range clients {
		conn := dialRaw(t, addr)
		key := tag + strconv.Itoa(ci)
		wg.Go(func() {
			room := make(chan struct{}, window) // commands sent, not yet answered
			dead := make(chan struct{})         // the reader stopped
			read := make(chan error, 1)
			go func() {
				defer close(dead)
				for range room {
					b, err := reply.Read(conn.br, nil)
					if err == nil && b[0] != ':' {
						err = fmt.Errorf("RPUSH answered %q", b)
					}
					if err != nil {
						read <- err
						return
					}
					answers[ci].Add(1)
				}
				read <- nil
			}()
			conn.c.SetDeadline(time.Now().Add(60 * time.Second))
		send:
			for n := 0; !stop.Load(); {
				var batch []byte
				for range 3 {
					batch = router.AppendCommand(batch, [][]byte{[]byte("RPUSH"), []byte(key), []byte(strconv.Itoa(n))})
					n++
					select {
					case room <- struct{}{}:
					case <-dead:
						break send
					}
				}
				if _, err := conn.c.Write(batch); err != nil {
					t.Error(err)
					break
				}
			}
			close(room)
			if err := <-read; err != nil {
				t.Error(err)
			}
		})
	}
	// Every client answered window more after the move: nothing sent
	// before it is still in flight.
	settled := func() {
		var at [clients]int64
		for ci := range clients {
			at[ci] = answers[ci].Load()
		}
		waitUntil(t, "every client's commands in flight across the move are answered", func() bool {
			for ci := range clients {
				if answers[ci].Load() < at[ci]+window+3 {
					return false
				}
			}
			return true
		})
	}
	settled()
	for i := range 4 {
		from := primaryOf(t, c, tag)
		to := c.Nodes[(i+1)%3]
		if to == from {
			to = c.Nodes[(i+2)%3]
		}
		if err := c.MoveSlot(ctx, slot.Of(tag), to); err != nil {
			t.Fatal(err)
		}
		// sluice's own slot map too: else a command still bouncing from
		// the first move's old owner could meet the next move.
		waitUntil(t, "sluice's slot map has the move", func() bool {
			routed := []router.Forward{{Slot: slot.Of(tag)}}
			r.Route(routed)
			return routed[0].Addr == to.Addr
		})
		settled()
	}
	stop.Store(true)
	wg.Wait()
	check := dialRaw(t, addr)
	for ci := range clients {
		list := strings.Split(check.do("LRANGE", tag+strconv.Itoa(ci), "0", "-1"), "\r\n")
		want := 0
		for i := 2; i < len(list); i += 2 {
			if list[i] != strconv.Itoa(want) {
				t.Errorf("loops %d, client %d: %s at place %d, want %d", loops, ci, list[i], want, want)
				break
			}
			want++
		}
		if int64(want) != answers[ci].Load() {
			t.Errorf("loops %d, client %d: %d in order of %d pushed", loops, ci, want, answers[ci].Load())
		}
	}
}
