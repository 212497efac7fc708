package hotkey

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// start is a window-aligned clock reading far from zero, as real clocks are.
const start = int64(1_700_000_000) * int64(time.Second)

func TestAdd(t *testing.T) {
	for _, tt := range []struct {
		name   string
		window time.Duration
		adds   []int64 // clock readings of Adds of one key
		at     int64   // when Rate is read
		want   float64
	}{
		{"first add", time.Second, []int64{start}, start, 1},
		{"window 0 is 1s", 0, []int64{start}, start, 1},
		{"negative window is 1s", -time.Minute, []int64{start}, start, 1},
		{"short window scales up", 250 * time.Millisecond, []int64{start, start + 1}, start + 2, 8},
		{"long window scales down", 10 * time.Second, []int64{start}, start, 0.1},
		{"previous window fully counted at its end", time.Second, []int64{start - 1}, start, 1},
		{"clock below zero", time.Second, []int64{-1, -2}, 0, 2},
		{"clock below zero, half a window on", time.Second, []int64{-1, -2}, 5e8, 1},
		{"two windows on", time.Second, []int64{start - 1}, start + int64(time.Second), 0},
	} {
		c := New(tt.window)
		var got float64
		for _, now := range tt.adds {
			got = c.Add("k", now)
		}
		if want := float64(len(tt.adds)) * float64(time.Second) / float64(c.window); got != want {
			t.Errorf("%s: last Add = %v, want %v", tt.name, got, want)
		}
		if got := c.Rate("k", tt.at); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: Rate = %v, want %v", tt.name, got, tt.want)
		}
		if got := c.Rate("other", tt.at); got != 0 {
			t.Errorf("%s: Rate of a key never added = %v, want 0", tt.name, got)
		}
	}
}

// A key at 5,000/s among 100,000 keys sharing 50,000/s stands out, and
// none of the others looks hot.
func TestHotKeyAmongBackground(t *testing.T) {
	const (
		step       = 20 * time.Microsecond // one background Add: 50,000/s
		hotEvery   = 10                    // one hot Add every 10 steps: 5,000/s
		background = 100_000
		hotRate    = 5_000
		bgRate     = 50_000
	)
	// Count-min bound: in each row the hot key's counter also holds the
	// background Adds that hash to it, N/width of them on average, where
	// N is the background weight in the estimate (N/s × 1 window = 50,000
	// whatever the blend of current and previous window). Markov's
	// inequality makes a row exceed e·N/width with probability under 1/e,
	// so all four rows do with probability under e⁻⁴; the real tail is far
	// thinner (a row holds Poisson(24.4) and the bound is 66), so the test
	// does not flake. One more for the Add at the instant of measuring.
	hi := hotRate + math.E*bgRate/width + 1
	const lo, bgMax = 4_900, 500

	keys := make([]string, background)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	c := New(time.Second)
	now := start
	for _, at := range []time.Duration{time.Second, 1500 * time.Millisecond, 2250 * time.Millisecond} {
		for ; now < start+int64(at); now += int64(step) {
			if (now-start)/int64(step)%hotEvery == 0 {
				c.Add("hot", now)
			}
			c.Add(keys[rnd.IntN(background)], now)
		}
		if got := c.Rate("hot", now); got < lo || got > hi {
			t.Errorf("after %v: hot Rate = %.1f, want within [%v, %.1f]", at, got, lo, hi)
		}
		worst, key := 0.0, ""
		for _, k := range keys {
			if r := c.Rate(k, now); r > worst {
				worst, key = r, k
			}
		}
		if worst >= bgMax {
			t.Errorf("after %v: Rate(%q) = %.1f, want below %v", at, key, worst, bgMax)
		}
	}
}

// A key that starts at 4,000/s is reported over 2,000/s once 0.5s of it is
// in the last window, wherever in its first window it starts.
func TestDetection(t *testing.T) {
	const step = 250 * time.Microsecond // 4,000/s
	for _, tt := range []struct {
		offset time.Duration // into its first window
		want   time.Duration
	}{
		{0, 500 * time.Millisecond},
		{250 * time.Millisecond, 500 * time.Millisecond},
		{500 * time.Millisecond, 500 * time.Millisecond},
		{499 * time.Millisecond, 500 * time.Millisecond},
		// Starting late, the key's first window ends before it has
		// 2,000 there, and the estimate assumes those 1,200 were spread
		// over the whole window: it dips to 1,200 at the boundary, then
		// climbs 2,800/s. The worst offset is 1-1/√2 of the window,
		// 0.5858s; 0.7 gives 1,200 + 2,800x > 2,000 at x = 0.2855s.
		{700 * time.Millisecond, 585500 * time.Microsecond},
	} {
		c := New(time.Second)
		begin := start + int64(tt.offset)
		var got time.Duration = -1
		for now := begin; now < begin+int64(time.Second); now += int64(step) {
			if c.Add("k", now) > 2_000 {
				got = time.Duration(now - begin)
				break
			}
		}
		if d := got - tt.want; d < -step || d > step {
			t.Errorf("starting %v into a window: over 2,000/s after %v, want %v (±%v)", tt.offset, got, tt.want, step)
		}
	}
}

// After a key stops, its rate slides down with the share of the previous
// window still in the last window-long span, and reaches 0 when its Adds are
// two windows back, whether or not anything else moved the sketches on.
func TestSliding(t *testing.T) {
	const ms = int64(time.Millisecond)
	checks := []struct {
		at   int64 // since start
		want float64
	}{
		{1000 * ms, 1000}, // all of window 0 is in the last second
		{1250 * ms, 750},
		{1500 * ms, 500},
		{1750 * ms, 250},
		{1999 * ms, 1},
		{2000 * ms, 0},
		{3000 * ms, 0},
		{3500 * ms, 0}, // sketch 1 never held window 1 or 3
		{4500 * ms, 0}, // sketch 0 still holds window 0 when nothing rotated it
		{10_000 * ms, 0},
	}
	for _, others := range []bool{false, true} {
		c := New(time.Second)
		now := start
		for ; now < start+1000*ms; now += ms { // 1,000/s through window 0
			c.Add("k", now)
		}
		for _, ck := range checks {
			for ; others && now < start+ck.at; now += ms {
				c.Add("a", now)
				c.Add("b", now)
			}
			if got := c.Rate("k", start+ck.at); math.Abs(got-ck.want) > 1e-6 {
				t.Errorf("others added: %v; %v after start: Rate = %v, want %v", others, time.Duration(ck.at), got, ck.want)
			}
		}
		if got := c.Add("k", start+10_500*ms); got != 1 {
			t.Errorf("others added: %v; first Add after idling: got %v, want 1", others, got)
		}
	}
}

// Concurrent Adds of one key within a window lose nothing, also when they
// all arrive at a sketch that has to be cleared first.
func TestConcurrentAdds(t *testing.T) {
	const goroutines, adds = 8, 10_000
	for _, w := range []time.Duration{time.Second, 250 * time.Millisecond, 3 * time.Second} {
		c := New(w)
		now := start + 7*int64(w) + int64(w)/3
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range adds {
					c.Add("k", now)
				}
			})
		}
		wg.Wait()
		want := goroutines * adds * (float64(time.Second) / float64(w))
		if got := c.Rate("k", now); got != want {
			t.Errorf("window %v: Rate = %v, want %v", w, got, want)
		}
	}
}

// Goroutines whose clocks cross into the next window at different moments
// lose no counts while one of them clears that window's sketch.
func TestConcurrentRotation(t *testing.T) {
	const goroutines, adds = 8, 10_000
	w := int64(time.Second)
	c := New(time.Second)
	c.Add("k", start-w) // so the next window's sketch holds an old window
	var wg sync.WaitGroup
	var inFirst int
	for g := range goroutines {
		cross := 2_000 + 800*g // this goroutine's first Add in the next window
		inFirst += cross
		wg.Go(func() {
			for i := range adds {
				now := start + int64(i)
				if i >= cross {
					now += w
				}
				c.Add("k", now)
			}
		})
	}
	wg.Wait()
	want := float64(goroutines*adds-inFirst) + float64(inFirst)*0.5
	if got := c.Rate("k", start+w+w/2); math.Abs(got-want) > 1e-6 {
		t.Errorf("Rate = %v, want %v", got, want)
	}
}

func benchKeys() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("sluice:{user:%d}:login", i)
	}
	return keys
}

// The clock moves 100ns per Add, so window rotations are part of the cost.
func BenchmarkAdd(b *testing.B) {
	for _, keys := range [][]string{{"sluice:{user:12345}:login"}, benchKeys()} {
		b.Run(fmt.Sprintf("keys=%d", len(keys)), func(b *testing.B) {
			c := New(time.Second)
			b.ReportAllocs()
			now := start
			for i := 0; b.Loop(); i++ {
				c.Add(keys[i&(len(keys)-1)], now)
				now += 100
			}
		})
	}
}

func BenchmarkAddParallel(b *testing.B) {
	for _, keys := range [][]string{{"sluice:{user:12345}:login"}, benchKeys()} {
		b.Run(fmt.Sprintf("keys=%d", len(keys)), func(b *testing.B) {
			c := New(time.Second)
			b.ReportAllocs()
			var seq sync.Mutex
			next := 0
			b.RunParallel(func(pb *testing.PB) {
				seq.Lock()
				i := next * 331 // each goroutine starts elsewhere in the keys
				next++
				seq.Unlock()
				now := start
				for ; pb.Next(); i++ {
					c.Add(keys[i&(len(keys)-1)], now)
					now += 100
				}
			})
		})
	}
}
