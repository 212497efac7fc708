package proxy_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// gateDecider is the router, with each round handed to round first, on
// the goroutine that submits it (a loop's own, for a loop): round calls
// decide once, then or later, to send the round on, and decide calls
// after, if not nil, once all its results are reported. A round decided
// later, from another goroutine, goes apart (through the router's own
// connections): a loop's bucket pipes are the loop's alone.
type gateDecider struct {
	*router.Cluster
	round func(reqs []router.Request, decide func(after func(), apart bool))
}

func (g *gateDecider) Submit(ctx context.Context, reqs []router.Request, res []router.Result, done func(idx []int)) {
	g.SubmitVia(ctx, nil, g.Map(), reqs, res, done)
}

func (g *gateDecider) SubmitVia(ctx context.Context, via router.Pipes, m router.SlotMap, reqs []router.Request, res []router.Result, done func(idx []int)) {
	g.round(reqs, func(after func(), apart bool) {
		var mu sync.Mutex
		left := len(reqs)
		d := func(idx []int) {
			mu.Lock()
			if idx == nil {
				left = 0
			} else {
				left -= len(idx)
			}
			last := left == 0
			mu.Unlock()
			done(idx)
			if last && after != nil {
				after()
			}
		}
		if via != nil && !apart {
			g.Cluster.SubmitVia(ctx, via, m, reqs, res, d)
		} else {
			g.Cluster.Submit(ctx, reqs, res, d)
		}
	})
}

// holds reports whether reqs has a request of op on key ("" any key).
func holds(reqs []router.Request, op router.Op, key string) bool {
	return slices.ContainsFunc(reqs, func(r router.Request) bool { return r.Op == op && (key == "" || r.Key == key) })
}

// signal is a channel closed by its func, once.
func signal() (chan struct{}, func()) {
	ch := make(chan struct{})
	return ch, sync.OnceFunc(func() { close(ch) })
}

func await(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting until %s", what)
	}
}

// unsent is how many bytes conn's socket has not had acknowledged: on
// loopback, 0 once the server's socket holds them all.
func unsent(t *testing.T, conn net.Conn) int {
	rc, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	n := -1
	rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// resetOrderPaths runs f with the router on a one-shard cluster behind g,
// on one event loop and on the goroutine path: f sets g's round, then
// serve starts the server.
func resetOrderPaths(t *testing.T, f func(t *testing.T, g *gateDecider, serve func() string, prefix string)) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c)
	run := strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	for _, loops := range []int{1, -1} {
		t.Run("loops="+strconv.Itoa(loops), func(t *testing.T) {
			g := &gateDecider{Cluster: r}
			serve := func() string { return serveConfig(t, proxy.Config{Decider: g, Loops: loops}) }
			f(t, g, serve, "{ro}"+run+"."+strconv.Itoa(loops)+".")
		})
	}
}

// Client X's THROTTLE of a bucket of one token, read in the same pass as
// another client's THROTTLE.RESET (of another key), and X's next THROTTLE
// of it, read later: the first is allowed and the second denied, in the
// order X sent them. On a loop, the round with the reset was decided
// apart from the loop's bucket pipes, X's first call with it; X's second
// went on the pipes in the next round, and was decided first if the
// reset's round took longer (here, held until then): X's first call was
// denied, the second allowed.
func TestResetRoundDoesNotReorderOthers(t *testing.T) {
	resetOrderPaths(t, func(t *testing.T, g *gateDecider, serve func() string, p string) {
		k, block, mark := p+"k", p+"block", p+"mark"
		blocked, blockedNow := signal()
		unblock, unblockNow := signal()
		held, heldNow := signal()
		open, openNow := signal()
		marked, markedNow := signal()
		g.round = func(reqs []router.Request, decide func(func(), bool)) {
			switch {
			case holds(reqs, router.Reset, ""):
				heldNow()
				go func() {
					<-open
					decide(nil, true)
				}()
			case holds(reqs, router.Take, block):
				// On a loop, its goroutine waits here while X and Y write.
				blockedNow()
				<-unblock
				decide(nil, false)
			case holds(reqs, router.Take, mark):
				decide(markedNow, false)
			default:
				decide(nil, false)
			}
		}
		addr := serve()
		t.Cleanup(func() { unblockNow(); openNow() }) // before the server closes
		z, y, x := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)
		for _, c := range []*rawConn{x, y} {
			c.do("PING") // the loop watches it: read in the pass that reads the other
		}
		z.send([]string{"THROTTLE", block, "9", "9", "1h"})
		await(t, blocked, "the loop waits in the round of Z")
		y.send([]string{"THROTTLE.RESET", p + "other"})
		x.send([]string{"THROTTLE", k, "1", "1", "1h"})
		waitUntil(t, "the server's sockets hold what X and Y sent", func() bool {
			return unsent(t, x.c) == 0 && unsent(t, y.c) == 0
		})
		unblockNow() // a loop reads both in one pass
		await(t, held, "the round with the reset is held")
		x.send([]string{"THROTTLE", k, "1", "1", "1h"}, []string{"THROTTLE", mark, "9", "9", "1h"})
		await(t, marked, "X's second THROTTLE is decided")
		openNow()
		first, second := x.read(), x.read()
		if !strings.HasPrefix(first, "*5\r\n:0\r\n") || !strings.HasPrefix(second, "*5\r\n:1\r\n") {
			t.Errorf("X's two THROTTLEs answered %q, then %q; want allowed, then denied", first, second)
		}
		if got := y.read(); got != ":0\r\n" {
			t.Errorf("THROTTLE.RESET answered %q, want :0", got)
		}
		if got := z.read(); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
			t.Errorf("Z's THROTTLE answered %q, want allowed", got)
		}
		x.read()
	})
}

// A THROTTLE and a THROTTLE.RESET of its key, pipelined in one write: the
// reset runs second and finds the bucket the THROTTLE took from (1). It
// waits for the THROTTLE to be answered, as the resets a loop reads are
// decided apart from the calls it sends on its bucket pipes: here the
// THROTTLE's round is held until the reset's round, if submitted with it,
// is decided, else until another client's round comes.
func TestResetWaitsForWhatCameBefore(t *testing.T) {
	resetOrderPaths(t, func(t *testing.T, g *gateDecider, serve func() string, p string) {
		k, mark := p+"k", p+"mark"
		arrived, arrivedNow := signal()
		var mu sync.Mutex
		var take func(func(), bool)
		resetCame := false
		release := sync.OnceFunc(func() {
			mu.Lock()
			decide := take
			mu.Unlock()
			go decide(nil, true)
		})
		g.round = func(reqs []router.Request, decide func(func(), bool)) {
			switch {
			case holds(reqs, router.Take, k):
				mu.Lock()
				take = decide
				mu.Unlock()
				arrivedNow()
			case holds(reqs, router.Reset, k):
				// Submitted with the THROTTLE: it runs first.
				mu.Lock()
				resetCame = true
				mu.Unlock()
				decide(release, false)
			case holds(reqs, router.Take, mark):
				mu.Lock()
				wait := resetCame
				mu.Unlock()
				if !wait {
					release()
				}
				decide(nil, false)
			default:
				decide(nil, false)
			}
		}
		addr := serve()
		t.Cleanup(func() { // before the server closes
			mu.Lock()
			some := take != nil
			mu.Unlock()
			if some {
				release()
			}
		})
		x, w := dialRaw(t, addr), dialRaw(t, addr)
		x.send([]string{"THROTTLE", k, "3", "1", "1h"}, []string{"THROTTLE.RESET", k})
		await(t, arrived, "X's THROTTLE is submitted")
		w.send([]string{"THROTTLE", mark, "9", "9", "1h"})
		got, reset := x.read(), x.read()
		if !strings.HasPrefix(got, "*5\r\n:0\r\n:3\r\n:2\r\n") || reset != ":1\r\n" {
			t.Errorf("THROTTLE answered %q, then THROTTLE.RESET %q; want the bucket taken from, then 1", got, reset)
		}
		w.read()
	})
}
