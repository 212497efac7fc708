package proxy_test

import (
	"context"
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

// moveBatch is one pipeline a client writes: its bytes, how many replies
// it gets, and the values it pushes.
type moveBatch func(key string, n int) (b []byte, replies int, next int)

func cmdBytes(b []byte, args ...string) []byte {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return router.AppendCommand(b, bs)
}

// pushesInOrderAcrossMoves has clients pipeline batches while their keys'
// slot moves four times, and checks that each list holds the values
// pushed in increasing order (a push that failed is missing, not out of
// place).
func pushesInOrderAcrossMoves(t *testing.T, c *clustertest.Cluster, r *router.Cluster, loops int, tag string, hello string, batch moveBatch) {
	ctx := context.Background()
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
	const clients, window = 4, 6 // batches in flight
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		answers [clients]atomic.Int64
	)
	defer func() { stop.Store(true); wg.Wait() }()
	for ci := range clients {
		conn := dialRaw(t, addr)
		if hello != "" {
			conn.do(strings.Fields(hello)...)
		}
		key := tag + strconv.Itoa(ci)
		wg.Go(func() {
			room := make(chan int, window) // replies of batches sent
			dead := make(chan struct{})
			read := make(chan error, 1)
			go func() {
				defer close(dead)
				for n := range room {
					for range n {
						if _, err := reply.Read(conn.br, nil); err != nil {
							read <- err
							return
						}
						answers[ci].Add(1)
					}
				}
				read <- nil
			}()
			conn.c.SetDeadline(time.Now().Add(60 * time.Second))
		send:
			for n := 0; !stop.Load(); {
				b, k, next := batch(key, n)
				n = next
				select {
				case room <- k:
				case <-dead:
					break send
				}
				if _, err := conn.c.Write(b); err != nil {
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
	settled := func() {
		var at [clients]int64
		for ci := range clients {
			at[ci] = answers[ci].Load()
		}
		waitUntil(t, "every client's commands in flight across the move are answered", func() bool {
			for ci := range clients {
				if answers[ci].Load() < at[ci]+window*10 {
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
		last, n := -1, 0
		for i := 2; i < len(list); i += 2 {
			v, _ := strconv.Atoi(list[i])
			if v <= last {
				t.Errorf("loops %d, client %d: %d after %d (place %d)", loops, ci, v, last, n)
				break
			}
			last = v
			n++
		}
		t.Logf("loops %d, client %d: %d pushed, last %d", loops, ci, n, last)
	}
}

// A transaction pipelined behind plain pushes to its key keeps its place
// while the key's slot moves: EXEC is routed when taken, as a command
// outside a transaction is, and waits for pushes routed by an older slot
// map (on the loops, an EXEC landed 6 batches ahead of pushes sent before
// it, in 2 of 3 runs). Both serving paths.
func TestTransactionOrderAcrossASlotMove(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{1, -1} {
		tag := "{mvexec" + strconv.Itoa(loops+1) + "}"
		pushesInOrderAcrossMoves(t, c, r, loops, tag, "", func(key string, n int) ([]byte, int, int) {
			var b []byte
			b = cmdBytes(b, "RPUSH", key, strconv.Itoa(n))
			b = cmdBytes(b, "RPUSH", key, strconv.Itoa(n+1))
			b = cmdBytes(b, "MULTI")
			b = cmdBytes(b, "RPUSH", key, strconv.Itoa(n+2))
			b = cmdBytes(b, "EXEC")
			return b, 5, n + 3
		})
	}
}

// A push whose reply CLIENT REPLY SKIP drops, taken again after a slot
// move, still skips its reply and keeps its place; RESP3.
func TestPassthroughOrderAcrossASlotMoveSkippingReplies(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{1, -1} {
		tag := "{mvskip" + strconv.Itoa(loops+1) + "}"
		pushesInOrderAcrossMoves(t, c, r, loops, tag, "HELLO 3", func(key string, n int) ([]byte, int, int) {
			var b []byte
			b = cmdBytes(b, "RPUSH", key, strconv.Itoa(n))
			b = cmdBytes(b, "CLIENT", "REPLY", "SKIP")
			b = cmdBytes(b, "RPUSH", key, strconv.Itoa(n+1))
			b = cmdBytes(b, "RPUSH", key, strconv.Itoa(n+2))
			return b, 2, n + 3
		})
	}
}
