package proxy

import (
	"runtime"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// busyClients counts the clients that sent in the current window of a
// millisecond and the one before, each client once a window, and forgets
// a window with no pass in it.
func TestBusyClientsCountsTheLastTwoWindows(t *testing.T) {
	var b busyClients
	cs := []*fdConn{{}, {}, {}}
	at := func(us int) time.Time { return time.Unix(1000, 0).Add(time.Duration(us) * time.Microsecond) }
	b.tick(at(0))
	b.saw(cs[0])
	b.saw(cs[0])
	b.saw(cs[1])
	if !b.few() {
		t.Fatalf("two clients (one of them twice): not few (%+v)", b)
	}
	b.saw(cs[2])
	if b.few() {
		t.Fatalf("three clients in a window: few (%+v)", b)
	}
	b.tick(at(999)) // the same window
	if b.few() || b.cur != 3 {
		t.Fatalf("the window ended early (%+v)", b)
	}
	b.tick(at(1000))
	b.saw(cs[0])
	if b.few() {
		t.Fatalf("the window before had three clients: few (%+v)", b)
	}
	b.tick(at(2000))
	if !b.few() || b.prev != 1 {
		t.Fatalf("one client in the window before, none now: not few (%+v)", b)
	}
	for _, c := range cs {
		b.saw(c)
	}
	// No pass for two windows: the one before now had no command.
	b.tick(at(4500))
	b.saw(cs[0])
	if !b.few() || b.prev != 0 {
		t.Fatalf("three clients 2.5 ms ago, one now: not few (%+v)", b)
	}
}

// A loop none of whose clients sent in the last two windows does not poll:
// an idle loop is woken about every 10 ms (preemption, see run), and each
// wake-up would otherwise cost it a spin of BusyPoll (an idle sluice's CPU
// tripled at the default 200 µs).
func TestBusyClientsNoneIsNotFew(t *testing.T) {
	var b busyClients
	at := func(us int) time.Time { return time.Unix(1000, 0).Add(time.Duration(us) * time.Microsecond) }
	b.tick(at(0))
	if b.few() {
		t.Fatalf("no client yet: few (%+v)", b)
	}
	b.saw(&fdConn{})
	b.tick(at(1000))
	if !b.few() {
		t.Fatalf("one client in the window before: not few (%+v)", b)
	}
	b.tick(at(2000))
	if b.few() {
		t.Fatalf("no client for two windows: few (%+v)", b)
	}
	b.tick(at(9000))
	if b.few() {
		t.Fatalf("no client for 7 ms: few (%+v)", b)
	}
}

// Loops wait holding a P only while every Server's loops in the process
// leave the others one: a second Server's loop on a 2-P process waits as
// the scheduler knows, and once the first Server closes, a new one's may
// hold a P again.
func TestRawWaitCountsEveryServersLoops(t *testing.T) {
	if runtime.GOMAXPROCS(0) != 2 {
		t.Skip("counts for 2 Ps")
	}
	// Other tests' loops end after their Servers close.
	for deadline := time.Now().Add(5 * time.Second); rawLoops.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d loops of other tests still wait raw", rawLoops.Load())
		}
	}
	start := func() *Server {
		s := New(Config{Decider: router.NewMemory(0), Loops: 1})
		if err := s.startLoops(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := start()
	second := start()
	if !first.loops[0].rawWait || second.loops[0].rawWait {
		t.Fatalf("raw waits: first %v, second %v; want the first only (2 Ps)", first.loops[0].rawWait, second.loops[0].rawWait)
	}
	first.Close()
	<-first.loops[0].done
	second.Close()
	<-second.loops[0].done
	third := start()
	defer third.Close()
	if !third.loops[0].rawWait {
		t.Fatal("a Server started after the others closed does not wait raw")
	}
}
