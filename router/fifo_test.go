package router

import (
	"math/rand/v2"
	"testing"
)

// fifo gives commands back in the order they came, whatever the mix of
// pushes and pops, as a plain slice would.
func TestFifoOrder(t *testing.T) {
	fs := make([]forwarded, 1000)
	for i := range fs {
		fs[i].i = i
	}
	var q fifo
	var model []*forwarded
	next := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for step := 0; step < 20000; step++ {
		switch {
		case rng.IntN(3) == 0 && next < len(fs):
			n := min(1+rng.IntN(5), len(fs)-next)
			batch := make([]*forwarded, n)
			for i := range batch {
				batch[i] = &fs[next]
				next++
			}
			q.push(batch...)
			model = append(model, batch...)
		case len(model) > 0:
			if got := q.pop(); got != model[0] {
				t.Fatalf("step %d: popped command %d, want %d", step, got.i, model[0].i)
			}
			model = model[1:]
		}
		if q.len() != len(model) {
			t.Fatalf("step %d: %d held, want %d", step, q.len(), len(model))
		}
		if next == len(fs) && len(model) == 0 {
			next = 0
		}
	}
}

// A node with a command or two in flight at a time, as unpipelined
// clients keep it, costs its queue no allocation: a slice taken from the
// front and appended at the back would need a new array every few
// commands.
func TestFifoReusesItsArray(t *testing.T) {
	var q fifo
	a, b := &forwarded{}, &forwarded{}
	q.push(a, b)
	allocs := testing.AllocsPerRun(1000, func() {
		q.push(a)
		q.pop()
		q.push(b, a)
		q.pop()
		q.pop()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per round of pushes and pops, want 0", allocs)
	}
	if q.len() != 2 {
		t.Fatalf("%d held, want 2", q.len())
	}
	if held := q.takeAll(); len(held) != 2 || q.len() != 0 {
		t.Fatalf("takeAll gave %d and left %d", len(held), q.len())
	}
}
