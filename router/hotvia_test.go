package router

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/slot"
)

// hotPipe is a cluster whose one shard owns every slot and whose key "k"
// is declared hot, with an event loop's bucket pipe to that shard.
func hotPipe(t testing.TB) (*Cluster, *Pipe, onePipe, *shard) {
	t.Helper()
	return pipeOf(t, ClusterConfig{HotKeys: []string{"k"}, Share: 1})
}

// pipeOf is hotPipe for a router of cfg.
func pipeOf(t testing.TB, cfg ClusterConfig) (*Cluster, *Pipe, onePipe, *shard) {
	t.Helper()
	// Its background work runs once, finds no cluster, and then not for
	// an hour: the client stored below is not one it could use.
	cfg.Seeds, cfg.ProbeInterval = []string{"127.0.0.1:1"}, 2*time.Hour
	c := NewCluster(cfg)
	t.Cleanup(c.Close)
	for end := time.Now().Add(10 * time.Second); c.connectErr.Load() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the router's first attempt to connect did not end in 10 s")
		}
	}
	sh := &shard{addr: "127.0.0.1:1"}
	sh.healthy.Store(true)
	topo := &topology{}
	topo.setOwners(0, slot.Count-1, sh)
	c.topo.Store(topo)
	// SubmitVia sends bucket calls only once a cluster client exists; the
	// pipe's calls never use it.
	var none rueidis.Client
	c.client.Store(&none)
	t.Cleanup(func() { c.client.Store(nil) }) // before Close, which closes it
	p := c.NewBucketPipe(sh.addr)
	return c, p, onePipe{p: p, hc: new(HotCalls)}, sh
}

// written takes what the pipe has to write: the many-bucket script calls,
// each as its arguments after EVALSHA's sha, numkeys and format.
func written(t *testing.T, p *Pipe) [][]string {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(p.Out()))
	p.Wrote(len(p.Out()), time.Now())
	var calls [][]string
	for {
		args, err := readCommand(br)
		if err != nil {
			t.Fatalf("the pipe wrote no command: %v", err)
		}
		if args == nil {
			return calls
		}
		if len(args) < 4 || args[0] != "EVALSHA" || args[2] != "0" || args[3] != "2" {
			t.Fatalf("the pipe wrote %q, want a many-bucket script call", args)
		}
		calls = append(calls, args[4:])
	}
}

// readCommand reads one RESP array of bulk strings; nil at the end.
func readCommand(br *bufio.Reader) ([]string, error) {
	line, err := br.ReadString('\n')
	if line == "" && err != nil {
		return nil, nil
	}
	n, err := strconv.Atoi(line[1 : len(line)-2])
	if line[0] != '*' || err != nil {
		return nil, fmt.Errorf("header %q", line)
	}
	args := make([]string, n)
	for i := range args {
		h, err := br.ReadString('\n')
		if err != nil || h[0] != '$' {
			return nil, fmt.Errorf("bulk header %q", h)
		}
		size, _ := strconv.Atoi(h[1 : len(h)-2])
		b := make([]byte, size+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// feed gives the pipe one many-bucket reply: a bucket's five values.
func feed(t *testing.T, p *Pipe, vals ...int64) {
	t.Helper()
	r := fmt.Appendf(nil, "*%d\r\n", len(vals))
	for _, v := range vals {
		r = fmt.Appendf(r, ":%d\r\n", v)
	}
	if err := p.Feed(copy(p.ReadBuf(len(r)), r)); err != nil {
		t.Fatal(err)
	}
}

// A hot key's calls go on the event loop's own bucket pipe, not through
// the coalescer's goroutine and rueidis: a round's calls as one step that
// decides them all, and the calls of rounds read while that step is out
// as the next one, sent once it is answered, on the loop's goroutine.
func TestHotCallsGoOnTheLoopsPipe(t *testing.T) {
	c, p, via, _ := hotPipe(t)
	iv, err := bucket.Limit{Capacity: 10, Refill: 10, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	round := func(n int) ([]Result, *[]int) {
		reqs := make([]Request, n)
		for i := range reqs {
			reqs[i] = Request{Op: Take, Key: "k", Interval: iv, Cost: 1}
		}
		res := make([]Result, n)
		var done []int
		c.SubmitVia(context.Background(), via, c.Map(), reqs, res, func(idx []int) { done = append(done, idx...) })
		return res, &done
	}
	res1, done1 := round(3)
	calls := written(t, p)
	// The key's own bucket (declared hot, not split yet): one step of 3.
	if len(calls) != 1 || len(calls[0]) != 8 || calls[0][0] != KeyPrefix+"k" || calls[0][6] != "3" {
		t.Fatalf("first round wrote %q, want one step on %q deciding 3 calls", calls, KeyPrefix+"k")
	}
	hk := (*c.hot.keys.Load())["k"]
	if hk.batch.busy || len(hk.batch.queue) > 0 {
		t.Fatal("a hot call went to the coalescer")
	}
	// Read while that step is out: queued for the key's next step.
	res2, done2 := round(2)
	if len(p.Out()) > 0 {
		t.Fatalf("a second step went out while the first was answered: %q", written(t, p))
	}
	if len(*done1)+len(*done2) > 0 {
		t.Fatal("calls reported before their step was answered")
	}
	// All three took a token: 7 left after the last.
	feed(t, p, 0, 7, -1, 300_000, 3)
	if !slices.Equal(*done1, []int{0, 1, 2}) {
		t.Fatalf("first round reported %v, want all 3", *done1)
	}
	for i, want := range []int64{9, 8, 7} {
		if r := res1[i]; r.Err != nil || r.Limited || r.Remaining != want {
			t.Fatalf("first round's call %d: %+v, want allowed with %d left", i, r, want)
		}
	}
	calls = written(t, p)
	if len(calls) != 1 || calls[0][0] != KeyPrefix+"k" || calls[0][6] != "2" {
		t.Fatalf("after the answer the pipe wrote %q, want the 2 queued calls as one step", calls)
	}
	// One more taken, the last denied.
	feed(t, p, 1, 6, 100_000, 400_000, 1)
	if !slices.Equal(*done2, []int{0, 1}) {
		t.Fatalf("second round reported %v, want both", *done2)
	}
	if res2[0].Limited || res2[0].Remaining != 6 || !res2[1].Limited || res2[1].RetryAfter != 100_000 {
		t.Fatalf("second round: %+v, want the first allowed with 6 left and the second denied", res2)
	}
	if len(via.hc.keys) != 0 {
		t.Fatalf("the loop still holds %d hot keys with nothing in flight", len(via.hc.keys))
	}
}

// A hot key's step lost with its connection marks the shard failed and
// decides its calls, and those queued behind it, by the fallback; the
// loop keeps nothing of the key.
func TestHotCallsOfALostPipeFallBack(t *testing.T) {
	c, p, via, sh := hotPipe(t)
	iv, err := bucket.Limit{Capacity: 10, Refill: 10, Period: 1_000_000}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	var reported int
	var all []Result
	for _, n := range []int{2, 3} {
		reqs := make([]Request, n)
		for i := range reqs {
			reqs[i] = Request{Op: Take, Key: "k", Interval: iv, Cost: 1}
		}
		res := make([]Result, n)
		c.SubmitVia(context.Background(), via, c.Map(), reqs, res, func(idx []int) {
			reported += len(idx)
			for _, i := range idx {
				all = append(all, res[i])
			}
		})
	}
	if calls := written(t, p); len(calls) != 1 {
		t.Fatalf("wrote %q, want one step", calls)
	}
	p.Fail(errors.New("connection reset"))
	if reported != 5 {
		t.Fatalf("%d of 5 calls reported after the connection was lost", reported)
	}
	for i, r := range all {
		if r.Err != nil || r.Source != SourceLocal {
			t.Fatalf("call %d: %+v, want decided by the fallback", i, r)
		}
	}
	if sh.healthy.Load() {
		t.Fatal("the shard is still healthy after its connection was lost")
	}
	if len(via.hc.keys) != 0 {
		t.Fatalf("the loop still holds %d hot keys with nothing in flight", len(via.hc.keys))
	}
}

// FuzzHotCalls drives a split hot key's calls on a loop's pipe through
// random interleavings of rounds, answers (all taken, some, none, a
// bucket's error), lost connections and a shard coming back: every call
// is reported exactly once, and once nothing is in flight the loop holds
// nothing of the key (a batch never settled would keep the key's later
// calls from ever being sent).
func FuzzHotCalls(f *testing.F) {
	f.Add([]byte{0, 1, 0, 5, 1, 9, 2, 3, 0, 1})
	f.Add([]byte{4, 8, 5, 13, 2, 0, 4, 3, 1, 1, 6})
	f.Add([]byte{0, 0, 0, 2, 3, 0, 5, 9, 13, 17})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		c, p, via, sh := hotPipe(t)
		iv, err := bucket.Limit{Capacity: 10, Refill: 10, Period: 1_000_000}.Interval()
		if err != nil {
			t.Fatal(err)
		}
		hk := c.hot.add("k", true)
		hk.setSplit(lua.Split{Tags: []string{"a", "b", "c"}, Gen: "1", Base: "0", TTL: time.Minute}, time.Now().UnixNano())
		var reported []int    // per request: times reported
		var pending [][]int64 // written script calls: each bucket's n
		submit := func(n, cost int) {
			first := len(reported)
			reported = append(reported, make([]int, n)...)
			reqs := make([]Request, n)
			for i := range reqs {
				reqs[i] = Request{Op: Take, Key: "k", Interval: iv, Cost: int64(cost)}
			}
			res := make([]Result, n)
			c.SubmitVia(context.Background(), via, c.Map(), reqs, res, func(idx []int) {
				for _, i := range idx {
					reported[first+i]++
				}
			})
		}
		collect := func() {
			for _, call := range written(t, p) {
				var ns []int64
				for i := 0; i < len(call); {
					if call[i+1] == "=" {
						ns = append(ns, ns[len(ns)-1])
						i += 2
						continue
					}
					n, _ := strconv.ParseInt(call[i+6], 10, 64)
					ns = append(ns, n)
					i += 8
				}
				pending = append(pending, ns)
			}
		}
		answer := func(how byte) {
			ns := pending[0]
			pending = pending[1:]
			r := fmt.Appendf(nil, "*%d\r\n", 5*len(ns))
			for k, n := range ns {
				switch (int(how) + k) % 4 {
				case 0: // all taken
					r = fmt.Appendf(r, ":0\r\n:%d\r\n:-1\r\n:100000\r\n:%d\r\n", 3, n)
				case 1: // none
					r = fmt.Appendf(r, ":1\r\n:0\r\n:100000\r\n:400000\r\n:0\r\n")
				case 2: // the first half
					r = fmt.Appendf(r, ":1\r\n:0\r\n:100000\r\n:400000\r\n:%d\r\n", n/2)
				default: // the bucket's own error
					r = fmt.Appendf(r, ":3\r\n$9\r\nWRONGTYPE\r\n:0\r\n:0\r\n:0\r\n")
				}
			}
			if err := p.Feed(copy(p.ReadBuf(len(r)), r)); err != nil {
				t.Fatal(err)
			}
		}
		for _, op := range ops {
			switch op % 5 {
			case 0, 4:
				submit(int(op/5)%4+1, int(op/20)%3+1)
			case 1:
				if len(pending) > 0 {
					answer(op / 5)
				}
			case 2:
				p.Fail(errors.New("connection reset"))
				pending = nil
			case 3:
				sh.healthy.Store(true)
			}
			collect()
		}
		// Everything still out is answered, and what that sends on too.
		sh.healthy.Store(true)
		for i := 0; len(pending) > 0; i++ {
			if i > 100 {
				t.Fatal("calls still going out after 100 answers")
			}
			answer(0)
			collect()
		}
		for i, n := range reported {
			if n != 1 {
				t.Fatalf("request %d reported %d times, want once", i, n)
			}
		}
		if len(via.hc.keys) != 0 {
			t.Fatalf("the loop holds %d hot keys with nothing in flight", len(via.hc.keys))
		}
	})
}
