package proxy_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// staleMap is the router, but while old is set the loop checks its bucket
// takes against that map: as when the router reads a new one between a
// take and the end of the loop's pass, where the round is submitted. It
// records which nodes' bucket pipes the calls are sent on.
type staleMap struct {
	*router.Cluster
	old atomic.Pointer[router.SlotMap]

	mu     sync.Mutex
	sentTo []string
}

func (d *staleMap) Map() router.SlotMap {
	if m := d.old.Load(); m != nil {
		return *m
	}
	return d.Cluster.Map()
}

func (d *staleMap) SubmitVia(ctx context.Context, via router.Pipes, m router.SlotMap, reqs []router.Request, res []router.Result, done func(idx []int)) {
	d.Cluster.SubmitVia(ctx, recordPipes{via, d}, m, reqs, res, done)
}

func (d *staleMap) sent() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.sentTo)
}

type recordPipes struct {
	router.Pipes
	d *staleMap
}

func (p recordPipes) BucketPipe(addr string) *router.Pipe {
	p.d.mu.Lock()
	p.d.sentTo = append(p.d.sentTo, addr)
	p.d.mu.Unlock()
	return p.Pipes.BucketPipe(addr)
}

// A THROTTLE taken on a loop because the client's calls in flight went by
// the slot map of the generation it was checked against is sent by that
// map, even if the router has read a newer one, which moved its slot, by
// the end of the pass: sent by the newer map straight to the new owner, it
// would overtake those calls, which reach the new owner only once the old
// one redirects them (the remaining of pipelined THROTTLEs of one bucket
// going back up).
func TestBucketRoundGoesByTheMapItsTakesWereCheckedAgainst(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	d := &staleMap{Cluster: r}
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: d, Forwarder: r, Loops: 1}))
	key := "{slotpass}k"
	throttle := []string{"THROTTLE", key, "10", "1", "1h"}
	// Allowed, of 10, 9 remaining.
	if got, want := conn.do(throttle...), "*5\r\n:0\r\n:10\r\n:9\r\n"; !strings.HasPrefix(got, want) {
		t.Fatalf("first THROTTLE: %q, want %q", got, want)
	}
	from := primaryOf(t, c, key)
	if sent := d.sent(); !slices.Equal(sent, []string{from.Addr}) {
		t.Fatalf("first THROTTLE sent to %v, want its owner %s", sent, from.Addr)
	}
	old := r.Map()
	to := otherPrimary(c, from)
	if err := c.MoveSlot(context.Background(), slot.Of(key), to); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the router's slot map has the move", func() bool {
		routed := []router.Forward{{Slot: slot.Of(key)}}
		r.Route(routed)
		return routed[0].Addr == to.Addr
	})
	d.old.Store(&old)
	// Redirected by the old owner, it is still decided, and in turn.
	if got, want := conn.do(throttle...), "*5\r\n:0\r\n:10\r\n:8\r\n"; !strings.HasPrefix(got, want) {
		t.Fatalf("THROTTLE after the move: %q, want %q", got, want)
	}
	if sent := d.sent(); !slices.Equal(sent, []string{from.Addr, from.Addr}) {
		t.Fatalf("THROTTLE checked against the map before the move sent to %v, want the old owner %s (not %s)", sent[1:], from.Addr, to.Addr)
	}
}
