//go:build linux

package proxy

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-rl/sluice/router"
	cmdspec "github.com/sluice-rl/sluice/router/command"
	hashslot "github.com/sluice-rl/sluice/router/slot"
)

// partsForwarder knows EXISTS only, and answers each part ":1" at once.
type partsForwarder struct{ Forwarder }

func (partsForwarder) Commands() map[string]*cmdspec.Spec {
	return map[string]*cmdspec.Spec{"exists": {Name: "exists", Arity: -2, Flags: []string{"readonly", "fast"},
		KeySpecs: []cmdspec.KeySpec{{Flags: []string{"RO"}, BeginSearch: "index", Index: 1, FindKeys: "range", LastKey: -1, KeyStep: 1}}}}
}

func (partsForwarder) Route([]router.Forward) uint64 { return 1 }

func (partsForwarder) Forward(_ context.Context, _ router.Pipes, cmds []router.Forward, replies [][]byte, done func([]int)) {
	idx := make([]int, len(cmds))
	for i := range cmds {
		replies[i], idx[i] = []byte(":1\r\n"), i
	}
	done(idx)
}

// A pass takes about passParts parts of one client's commands: the rest of
// what it read waits for the next passes, which take it without an event
// and without reading the client again meanwhile; also when the loop
// drains, which answers what was read. One read of EXISTSes over hundreds
// of slots was split, sent and merged in one pass, while the loop's other
// clients waited.
func TestPassTakesBoundedPartsOfAClient(t *testing.T) {
	for _, drain := range []bool{false, true} {
		t.Run(fmt.Sprint("drain=", drain), func(t *testing.T) { passTakesBoundedParts(t, drain) })
	}
}

func passTakesBoundedParts(t *testing.T, drain bool) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fds[0]) })
	l, c := newTestLoopOf(t, Config{Decider: &held{}, Forwarder: partsForwarder{}}, fds[1])

	const parts, cmds = 200, 5
	var keys []string
	seen := map[int]bool{}
	for i := 0; len(keys) < parts; i++ {
		k := fmt.Sprint("k", i)
		if sl := hashslot.Of(k); !seen[sl] {
			seen[sl] = true
			keys = append(keys, k)
		}
	}
	line := "EXISTS " + strings.Join(keys, " ") + "\r\n"
	if len(line)*cmds >= readSize {
		t.Fatal("the commands do not fit one read")
	}
	if _, err := syscall.Write(fds[0], []byte(strings.Repeat(line, cmds))); err != nil {
		t.Fatal(err)
	}
	perPass := (passParts + parts - 1) / parts
	if perPass >= cmds {
		t.Fatalf("%d parts a pass take all %d commands", passParts, cmds)
	}

	l.read(c) // the pass its event came in
	if n := inputWaiting(c.fd); n != 0 {
		t.Fatalf("%d bytes left in the socket after one read", n)
	}
	if drain {
		l.drain()
		l.wakeUp()
	}
	taken := c.inFlight()
	for pass := 1; ; pass++ {
		if want := min(perPass, cmds-(pass-1)*perPass); taken != want {
			t.Fatalf("pass %d took %d commands of %d parts, want %d", pass, taken, parts, want)
		}
		if c.backlog != (pass*perPass < cmds) {
			t.Fatalf("pass %d: backlog %v with %d of %d commands taken", pass, c.backlog, pass*perPass, cmds)
		}
		if c.backlog && l.sleep() != 0 {
			t.Fatal("the loop would sleep with commands read and not taken")
		}
		l.submit()
		l.endRound()
		if !c.backlog {
			break
		}
		if c.mask&syscall.EPOLLIN != 0 || !c.lingerEnd.IsZero() {
			t.Fatalf("pass %d: read again, or lingering, with commands read and not taken", pass)
		}
		if pass > cmds {
			t.Fatal("the commands are never all taken")
		}
		l.takeBacklog() // the next pass, without an event
		taken = c.inFlight()
	}
	if c.mask&syscall.EPOLLIN == 0 || len(c.pend) != 0 || c.lingerEnd.IsZero() == drain {
		t.Fatalf("all taken: mask %#x, %d bytes pending, lingering %v", c.mask, len(c.pend), !c.lingerEnd.IsZero())
	}
	want := strings.Repeat(fmt.Sprintf(":%d\r\n", parts), cmds)
	buf := make([]byte, 1024)
	n, err := syscall.Read(fds[0], buf)
	if err != nil || string(buf[:n]) != want {
		t.Fatalf("replies %q, %v; want %q", buf[:max(n, 0)], err, want)
	}
}
