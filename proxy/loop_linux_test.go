package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// gate is a Decider whose first rounds are held, each until it is let
// through, without holding up the caller; it records the size of every
// round.
type gate struct {
	batchRecorder
	hold  int64 // how many first calls wait
	calls atomic.Int64
	held  chan struct{} // a call is waiting
	open  chan struct{} // lets one through
}

func newGate(hold int64) *gate {
	g := &gate{batchRecorder: batchRecorder{inner: router.NewMemory(0)}, hold: hold, held: make(chan struct{}), open: make(chan struct{})}
	return g
}

func (g *gate) Submit(ctx context.Context, reqs []router.Request, res []router.Result, done func([]int)) {
	if g.calls.Add(1) > g.hold {
		g.batchRecorder.Submit(ctx, reqs, res, done)
		return
	}
	go func() {
		g.held <- struct{}{}
		<-g.open
		g.batchRecorder.Submit(ctx, reqs, res, done)
	}()
}

// A loop does not wait for the shards: while one client's decision is
// held, another client's THROTTLE is decided and answered, and the first
// client's later PING waits behind its THROTTLE, as RESP's order requires.
func TestHeldDecisionDelaysOnlyItsClient(t *testing.T) {
	g := newGate(1)
	addr := serveConfig(t, proxy.Config{Decider: g, Loops: 1})
	a, aR := raw(t, addr)
	b, bR := raw(t, addr)
	io.WriteString(a, "THROTTLE k 9 1 1s\r\n")
	<-g.held
	io.WriteString(a, "PING\r\n")
	io.WriteString(b, "THROTTLE k2 9 1 1s\r\nPING\r\n")
	b.SetDeadline(time.Now().Add(5 * time.Second))
	if got := readLines(t, bR, 7); got != "*5 :0 :9 :8 :-1 :1000 +PONG" {
		t.Fatalf("other client: %s", got)
	}
	if n := aR.Buffered(); n != 0 {
		t.Fatalf("the held client got %d bytes before its decision", n)
	}
	g.open <- struct{}{}
	a.SetDeadline(time.Now().Add(5 * time.Second))
	if got := readLines(t, aR, 7); got != "*5 :0 :9 :8 :-1 :1000 +PONG" {
		t.Fatalf("held client: %s", got)
	}
}

// A reply that waits for nothing is written once the loop has nothing
// else to do, though a later command of its pipeline is still undecided
// (a loop delays it only while busy: maxDelays); on a goroutine, once
// the rest has kept it waiting for earlyWrite. A shard that hangs delays
// only the replies after its own.
func TestReplyAheadOfAHeldDecisionIsWritten(t *testing.T) {
	// As many loops as Ps: they wait in epoll_wait as any syscall, which no
	// preemption signal ends, so no pass comes that the test did not cause.
	for _, loops := range []int{runtime.GOMAXPROCS(0), -1} {
		t.Run(map[bool]string{true: "loops", false: "goroutines"}[loops > 0], func(t *testing.T) {
			g := newGate(1)
			addr := serveConfig(t, proxy.Config{Decider: g, Loops: loops})
			a, aR := raw(t, addr)
			io.WriteString(a, "PING\r\nTHROTTLE k 9 1 1s\r\n")
			<-g.held
			a.SetDeadline(time.Now().Add(10 * time.Second)) // generous: it never comes if delayed for ever
			if got := readLines(t, aR, 1); got != "+PONG" {
				t.Fatalf("PING ahead of a held THROTTLE: %s", got)
			}
			g.open <- struct{}{}
			if got := readLines(t, aR, 6); got != "*5 :0 :9 :8 :-1 :1000" {
				t.Fatalf("THROTTLE: %s", got)
			}
		})
	}
}

// readLines reads n reply lines and joins them with spaces.
func readLines(t *testing.T, r *bufio.Reader, n int) string {
	t.Helper()
	var got []string
	for range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, strings.TrimSpace(line))
	}
	return strings.Join(got, " ")
}

// A client with nothing to decide is answered while the shards are still
// deciding for the others of its round.
func TestLocalCommandsDoNotWaitForTheShards(t *testing.T) {
	g := newGate(2)
	addr := serveConfig(t, proxy.Config{Decider: g, Loops: 1})
	conns := make([]net.Conn, 3)
	readers := make([]*bufio.Reader, 3)
	for i := range conns {
		conns[i], readers[i] = raw(t, addr)
		io.WriteString(conns[i], "PING\r\n") // answered: the loop watches it
		if _, err := readers[i].ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	// The first round holds the loop while a THROTTLE and a PING arrive,
	// so that the next round reads both; its decision is held too.
	io.WriteString(conns[0], "THROTTLE a 9 1 1s\r\n")
	<-g.held
	io.WriteString(conns[1], "THROTTLE b 9 1 1s\r\n")
	io.WriteString(conns[2], "PING\r\n")
	g.open <- struct{}{}
	<-g.held
	// Generous: a PING waiting for the held decision never comes.
	conns[2].SetDeadline(time.Now().Add(10 * time.Second))
	line, err := readers[2].ReadString('\n')
	g.open <- struct{}{}
	if err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING in a round whose decision is held: %q, %v", line, err)
	}
	for _, r := range readers[:2] {
		if line, err := r.ReadString('\n'); err != nil || line != "*5\r\n" {
			t.Fatalf("THROTTLE: %q, %v", line, err)
		}
	}
}

// A client that sends much and reads nothing fills its socket: the loop
// keeps its replies, stops reading from it, and goes on serving the others.
// Once it reads, it gets every reply in order.
func TestSlowReaderDoesNotStallOthers(t *testing.T) {
	addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: 1})
	slow, slowR := raw(t, addr)
	slow.SetDeadline(time.Now().Add(30 * time.Second))
	const n, size = 400, 100 << 10 // 40 MB of echoes, commands longer than one read
	wrote := make(chan error, 1)
	go func() {
		for i := range n {
			arg := fmt.Sprintf("%06d", i) + strings.Repeat("x", size-6)
			if _, err := fmt.Fprintf(slow, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", size, arg); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	other, otherR := raw(t, addr)
	for range 3 {
		io.WriteString(other, "PING\r\n")
		if line, err := otherR.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("another client: %q, %v", line, err)
		}
	}
	select {
	case err := <-wrote:
		t.Fatalf("all %d MB were taken without a reader (%v): the test did not fill the socket", n*size>>20, err)
	default:
	}
	for i := range n {
		header, err := slowR.ReadString('\n')
		if err != nil || header != fmt.Sprintf("$%d\r\n", size) {
			t.Fatalf("reply %d: header %.40q, %v", i, header, err)
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(slowR, body); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if got := string(body[:6]); got != fmt.Sprintf("%06d", i) {
			t.Fatalf("reply %d carries echo %s", i, got)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// INFO says how many loops serve clients and how long they poll before
// they sleep: BusyPoll when they have a P each to spare, else nothing.
func TestInfoReportsLoops(t *testing.T) {
	// Another test's loops, closed, may still be ending: they count
	// against this Server's until they have.
	for deadline := time.Now().Add(5 * time.Second); proxy.RawLoops() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d loops of other tests still wait raw", proxy.RawLoops())
		}
	}
	poll := "busy_poll_us:0\r\n"
	if runtime.GOMAXPROCS(0) > 1 {
		poll = "busy_poll_us:150\r\n"
	}
	for _, tt := range []struct {
		loops int
		want  []string
	}{
		{1, []string{"io_loops:1\r\n", poll}},
		{runtime.GOMAXPROCS(0), []string{fmt.Sprintf("io_loops:%d\r\n", runtime.GOMAXPROCS(0)), "busy_poll_us:0\r\n"}},
		{-1, []string{"io_loops:0\r\n", "busy_poll_us:0\r\n"}},
	} {
		c := newGoRedis(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: tt.loops, BusyPoll: 150 * time.Microsecond}))
		text, err := c.Info(context.Background(), "server").Result()
		for _, want := range tt.want {
			if err != nil || !strings.Contains(text, want) {
				t.Errorf("Loops %d: INFO server lacks %q: %q, %v", tt.loops, want, text, err)
			}
		}
	}
}

// A client pipelines more steps on one key than a script call carries, on
// a cluster whose nodes have not loaded the script: the loop's bucket pipe
// sends several calls at once, and each step must still be taken in the
// client's order. (A call refused NOSCRIPT went to the goroutine path,
// behind the calls sent after it, which the node decided first.)
func TestLoopTakesAKeysPipelinedStepsInOrder(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	addr := serveConfig(t, proxy.Config{Decider: newRouter(t, c)})
	p := newGoRedis(t, addr).Pipeline()
	const n = 200
	cmds := make([]*goredis.Cmd, n)
	for j := range cmds {
		cmds[j] = p.Do(context.Background(), "THROTTLE", "ordered", 1000, 1, "60s")
	}
	if _, err := p.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	for j, cmd := range cmds {
		got, err := cmd.Int64Slice()
		if err != nil || got[2] != int64(999-j) {
			t.Fatalf("step %d: got %v (%v), want remaining %d", j, got, err, 999-j)
		}
	}
}

// A loop with a P to spare waits for events without telling the
// scheduler; the collector must still stop it: collections while it idles
// end, and it answers after them.
func TestIdleLoopLetsTheCollectorRun(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one P: the loops wait through the scheduler")
	}
	addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: 1})
	c, r := raw(t, addr)
	ping := func() {
		t.Helper()
		io.WriteString(c, "PING\r\n")
		if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("PING: %q, %v", line, err)
		}
	}
	ping()
	done := make(chan struct{})
	go func() {
		for range 3 {
			runtime.GC()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a collection did not end while a loop idled")
	}
	ping()
}

// An idle client is closed with no other client to wake its loop up: the
// loop's own timer finds it.
func TestIdleTimeoutAlone(t *testing.T) {
	t.Parallel() // it waits on the clock, not the CPU: alongside the others that do
	eachLoops(t, func(t *testing.T, loops int) {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops, IdleTimeout: 500 * time.Millisecond})
		conn, r := raw(t, addr)
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		if _, err := r.ReadByte(); err != io.EOF {
			t.Fatalf("the idle client is still open after %v: %v", time.Since(start), err)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("the idle client was closed after %v", took)
		}
	})
}

// A client sends THROTTLE.RESET, then, in a write of its own, a THROTTLE
// of the same key: the reset runs first, as one node runs a client's
// commands in order. On a loop the round with the reset was decided on a
// goroutine of its own while the next round's THROTTLE went out on the
// loop's bucket pipe, and most times ran first: the reset emptied the
// bucket the THROTTLE had just filled, and answered 1.
func TestResetRunsBeforeWhatFollows(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newRouter(t, c)
	eachIOConfig(t, proxy.Config{Decider: r}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		for i := range 100 {
			k := "ro" + strconv.Itoa(cfg.Loops) + ":" + strconv.Itoa(i)
			conn.send([]string{"THROTTLE.RESET", k})
			conn.send([]string{"THROTTLE", k, "3", "1", "1h", "3"})
			if reset, take := conn.read(), conn.read(); reset != ":0\r\n" || !strings.HasPrefix(take, "*5\r\n:0\r\n:3\r\n:0\r\n") {
				t.Fatalf("try %d: THROTTLE.RESET %q, then THROTTLE %q; want 0, then the bucket emptied", i, reset, take)
			}
		}
	})
}
