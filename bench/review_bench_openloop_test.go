package main

import (
	"context"
	"testing"
	"time"
)

// stallTarget answers at once, except that a call made after stallFrom
// (from its first call) waits until stallTo: a server that stops answering
// near the end of a run.
type stallTarget struct {
	first              time.Time
	stallFrom, stallTo time.Duration
}

func (t *stallTarget) name() string                                  { return "stall" }
func (t *stallTarget) dial() (conn, error)                           { return t, nil }
func (t *stallTarget) cpu(context.Context) (float64, float64, error) { return 0, 0, nil }
func (t *stallTarget) close()                                        {}

func (t *stallTarget) decide(_ context.Context, keys []string) (int, int, error) {
	if t.first.IsZero() {
		t.first = time.Now()
	}
	if time.Since(t.first) >= t.stallFrom {
		time.Sleep(time.Until(t.first.Add(t.stallTo)))
	}
	return len(keys), 0, nil
}

// Open loop at 1,000/s for 100 ms, the server stalled from 50 ms to 150 ms:
// the 50 calls due in the stall's part of the run waited 50 to 100 ms each.
// Ending at the deadline by the clock left them unsent and uncounted, and
// the run reported a p90 of about a millisecond.
func TestOpenLoopCountsAStallAtTheEnd(t *testing.T) {
	cfg, err := parseFlags([]string{"-clients", "1", "-rate", "1000", "-duration", "100ms", "-keys", "uniform:10"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg := &stallTarget{stallFrom: 50 * time.Millisecond, stallTo: 150 * time.Millisecond}
	r, err := runOnce(cfg, tg, cfg.keys.names(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops < 95 || r.Ops > 101 {
		t.Fatalf("%d calls, want the 100 due in the run", r.Ops)
	}
	if r.P90 < 40_000 {
		t.Fatalf("p90 %d µs, want at least 40 ms: the calls due during the stall", r.P90)
	}
}
