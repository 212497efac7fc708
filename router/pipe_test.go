package router

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/slot"
)

// pipeReplies are replies a node sends, of every shape Feed must find the
// end of, a big bulk string among them (read over many feeds).
var pipeReplies = []string{
	"+OK\r\n",
	"$-1\r\n",
	":42\r\n",
	"$5\r\nhello\r\n",
	"-ERR wrong number of arguments\r\n",
	"*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:1\r\n",
	"%1\r\n+k\r\n,1.5\r\n",
	"$70000\r\n" + strings.Repeat("v", 70000) + "\r\n",
	"*0\r\n",
	"_\r\n",
	"*-1\r\n",
	"!21\r\nSYNTAX invalid syntax\r\n",
	"=15\r\ntxt:Some string\r\n",
	"%2\r\n+a\r\n*2\r\n~1\r\n#t\r\n(123\r\n+b\r\n_\r\n",
	"|1\r\n+ttl\r\n:3600\r\n$1\r\nv\r\n",
}

// answered is a command whose answers are appended to got.
func answered(cmd string, replies int, got *[]string) *forwarded {
	b := &fwdBatch{replies: make([][]byte, 1), idx: []int{0}}
	b.done = func([]int) { *got = append(*got, string(b.replies[0])) }
	return &forwarded{cmd: []byte(cmd), replies: replies, batch: b}
}

// feedPipe sends one command per reply picked, feeds the replies' bytes
// in reads of the sizes cuts gives, and returns the answers in order.
func feedPipe(t *testing.T, picks, cuts []byte) (want, got []string) {
	p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
	var stream []byte
	for _, b := range picks {
		r := pipeReplies[int(b)%len(pipeReplies)]
		want = append(want, r)
		stream = append(stream, r...)
		p.send(answered("*1\r\n$4\r\nPING\r\n", 1, &got))
	}
	for i := 0; len(stream) > 0; i++ {
		n := len(stream)
		if len(cuts) > 0 {
			n = min(n, 1+int(cuts[i%len(cuts)])*int(cuts[i%len(cuts)]))
		}
		buf := p.ReadBuf(n)
		if err := p.Feed(copy(buf, stream[:n])); err != nil {
			t.Fatalf("Feed: %v", err)
		}
		stream = stream[n:]
	}
	return want, got
}

// Replies cut at any point are answered whole, in order, each once.
func TestPipeFeedsRepliesCutAnywhere(t *testing.T) {
	all := make([]byte, 3*len(pipeReplies))
	for i := range all {
		all[i] = byte(i)
	}
	for _, cuts := range [][]byte{nil, {0}, {1, 2, 3}, {7}, {255}} {
		picks := all
		if len(cuts) == 1 && cuts[0] == 0 {
			// Reads of one byte cut every reply at every byte in one
			// round; under -race each read of the big bulk costs all of
			// it read so far (Feed's copy), three rounds 2.7 s.
			picks = all[:len(pipeReplies)]
		}
		want, got := feedPipe(t, picks, cuts)
		if len(got) != len(want) {
			t.Fatalf("cuts %v: %d answers, want %d", cuts, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("cuts %v: answer %d is %.40q, want %.40q", cuts, i, got[i], want[i])
			}
		}
	}
}

// A transaction's replies (MULTI's +OK, +QUEUED each, then EXEC's array)
// answer it once, with the last; an ASKING before a command is consumed.
func TestPipeCountsSeveralRepliesPerCommand(t *testing.T) {
	p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
	var got []string
	p.send(answered("MULTI;SET;EXEC", 3, &got))
	asked := answered("GET", 1, &got)
	asked.asking = true
	p.send(asked)
	if !bytes.Contains(p.Out(), askingCmd) {
		t.Errorf("out %q: no ASKING before the asked command", p.Out())
	}
	in := "+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n+OK\r\n$1\r\nv\r\n"
	if err := p.Feed(copy(p.ReadBuf(len(in)), in)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "*1\r\n+OK\r\n" || got[1] != "$1\r\nv\r\n" {
		t.Errorf("answers %q, want EXEC's array and GET's bulk", got)
	}
	if p.Waiting() {
		t.Error("the pipe still waits after every reply came")
	}
}

// A reply nothing asked for, or bytes that are no reply, lose the
// connection; Fail then answers what waits an error naming the node.
func TestPipeRefusesWhatNothingAskedFor(t *testing.T) {
	p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
	if err := p.Feed(copy(p.ReadBuf(5), "+OK\r\n")); err == nil {
		t.Error("a reply with nothing sent: no error")
	}
	p = (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
	var got []string
	p.send(answered("GET", 1, &got))
	if err := p.Feed(copy(p.ReadBuf(8), "?what\r\n")); err == nil {
		t.Error("bytes that are no reply: no error")
	}
	p.Fail(bytes.ErrTooLarge)
	if len(got) != 1 || !strings.HasPrefix(got[0], "-ERR sluice: connection to 127.0.0.1:1 failed") {
		t.Errorf("after Fail: %q", got)
	}
	if p.Waiting() || len(p.Out()) > 0 {
		t.Error("Fail left commands waiting or bytes to write")
	}
}

func FuzzPipeFeed(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []byte{3})
	f.Add([]byte{7, 7, 3}, []byte{200, 1})
	f.Fuzz(func(t *testing.T, picks, cuts []byte) {
		if len(picks) > 64 {
			picks = picks[:64]
		}
		want, got := feedPipe(t, picks, cuts)
		if len(got) != len(want) {
			t.Fatalf("%d answers, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("answer %d is %.40q, want %.40q", i, got[i], want[i])
			}
		}
	})
}

// onePipe is an event loop's connections, all of them one pipe.
type onePipe struct {
	p  *Pipe
	hc *HotCalls
}

func (o onePipe) Pipe(string, bool, bool) *Pipe { return o.p }
func (o onePipe) BucketPipe(string) *Pipe       { return o.p }
func (o onePipe) HotCalls() *HotCalls           { return o.hc }

// forwardRound returns one loop's round of n GETs (50 clients pipelining
// 16 make 800) forwarded on a pipe, its node's replies (reply each) fed
// back; it reports an error if a command was not answered its reply.
func forwardRound(n int, reply string) func() error {
	c := &Cluster{}
	t := &topology{}
	sh := &shard{addr: "127.0.0.1:1"}
	t.setOwners(0, slot.Count-1, sh)
	c.topo.Store(t)
	p := c.NewPipe(sh.addr, false, false)
	cmds := make([]Forward, n)
	for i := range cmds {
		cmds[i] = Forward{Slot: i % 16384, Cmd: []byte("*2\r\n$3\r\nGET\r\n$8\r\nkey:0042\r\n")}
	}
	replies := make([][]byte, n)
	stream := bytes.Repeat([]byte(reply), n)
	answered := 0
	done := func(idx []int) { answered += len(idx) }
	return func() error {
		clear(replies)
		answered = 0
		c.Forward(context.Background(), onePipe{p: p}, cmds, replies, done)
		p.Wrote(len(p.Out()), time.Now())
		if err := p.Feed(copy(p.ReadBuf(len(stream)), stream)); err != nil {
			return err
		}
		if answered != n {
			return fmt.Errorf("%d of %d commands answered", answered, n)
		}
		for i, r := range replies {
			if string(r) != reply {
				return fmt.Errorf("command %d answered %q, want %q", i, r, reply)
			}
		}
		return nil
	}
}

// Forwarding allocates per round, not per command: replies are cut from
// an arena, also once what is left of it is too small for one more (a
// 9-byte reply leaves 8 bytes of a 32 KB arena), and the commands' state
// comes from a pool.
func TestForwardRoundAllocations(t *testing.T) {
	round := forwardRound(800, "$3\r\nxxx\r\n")
	var err error
	allocs := testing.AllocsPerRun(40, func() {
		if e := round(); e != nil && err == nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// A few per round (the batch, a new arena now and then, and with
	// -race a pooled slice dropped); one per command is 800.
	if allocs > 50 {
		t.Fatalf("%.0f allocations per round of 800 forwarded commands, want a few", allocs)
	}
}

// BenchmarkForwardRound is passthrough's own work for one round of 800
// GETs: what sluice spends per forwarded command besides its syscalls.
func BenchmarkForwardRound(b *testing.B) {
	round := forwardRound(800, "$3\r\nxxx\r\n")
	b.ReportAllocs()
	for b.Loop() {
		if err := round(); err != nil {
			b.Fatal(err)
		}
	}
}

// A bucket pipe's queue keeps nothing past what is still queued: a stale
// entry there would keep a finished round (its requests and results)
// alive for as long as the loop's connection lives.
func TestBucketQueueKeepsNoFinishedCalls(t *testing.T) {
	c := &Cluster{throttle: lua.NewThrottle()}
	sh := &shard{addr: "127.0.0.1:1"}
	p := c.NewBucketPipe(sh.addr)
	n := maxFlushes*maxPipeline + 10 // more than go out at once
	g := &shardCalls{owner: sh, calls: make([]call, n), reqs: make([]Request, n)}
	for i := range g.calls {
		g.reqs[i] = Request{Op: Take, Interval: bucket.Interval{Capacity: 10, U: 1, V: 1}, Cost: 1}
		g.calls[i] = call{req: i, owner: sh, key: fmt.Sprintf("k%d", i)}
	}
	c.sendVia(onePipe{p: p}, g)
	if len(p.bq) != 10 {
		t.Fatalf("%d calls queued after the first sends, want 10", len(p.bq))
	}
	for i, q := range p.bq[len(p.bq):cap(p.bq)] {
		if q.g != nil {
			t.Fatalf("the queue's backing array still holds a sent call at %d", len(p.bq)+i)
		}
	}
}

// A lost connection's pipe holds no buffer: a big reply cut by the loss
// and the commands it had queued are let go, and the pipe works again.
func TestFailedPipeHoldsNoBuffer(t *testing.T) {
	var got []string
	p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
	p.send(answered("*1\r\n$4\r\nPING\r\n", 1, &got))
	p.send(answered("*1\r\n$4\r\nPING\r\n", 1, &got))
	big := "$70000\r\n" + strings.Repeat("v", 40000)
	if err := p.Feed(copy(p.ReadBuf(len(big)), big)); err != nil {
		t.Fatal(err)
	}
	if cap(p.in) < 40000 || len(p.Out()) == 0 {
		t.Fatalf("before: in %d, out %d bytes", cap(p.in), len(p.Out()))
	}
	p.Fail(fmt.Errorf("lost"))
	if len(got) != 2 || !strings.HasPrefix(got[0], "-") {
		t.Fatalf("answers %q, want two errors", got)
	}
	if cap(p.in) != 0 || cap(p.out) != 0 {
		t.Fatalf("after Fail: in %d, out %d bytes held", cap(p.in), cap(p.out))
	}
	p.send(answered("*1\r\n$4\r\nPING\r\n", 1, &got))
	if err := p.Feed(copy(p.ReadBuf(7), "+PONG\r\n")); err != nil || got[2] != "+PONG\r\n" {
		t.Fatalf("after: %q, %v", got, err)
	}
}

// A keyless command goes to a primary not known to be unhealthy while
// there is one; with none healthy, to one of them all the same.
func TestKeylessCommandsPassOverAnUnhealthyPrimary(t *testing.T) {
	c := &Cluster{}
	topo := &topology{}
	for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
		s := &shard{addr: addr}
		s.healthy.Store(addr != "127.0.0.1:2")
		topo.primaries = append(topo.primaries, s)
	}
	seen := map[string]int{}
	for range 2000 {
		seen[c.addrOf(topo, AnySlot)]++
	}
	if seen["127.0.0.1:2"] > 0 || seen["127.0.0.1:1"]+seen["127.0.0.1:3"] != 2000 {
		t.Fatalf("picked %v: the unhealthy primary, or none", seen)
	}
	for _, s := range topo.primaries {
		s.healthy.Store(false)
	}
	if addr := c.addrOf(topo, AnySlot); addr == "" {
		t.Fatal("no primary when none is healthy")
	}
	if addr := c.addrOf(&topology{}, AnySlot); addr != "" {
		t.Fatalf("%q with no primary known", addr)
	}
}

// A passthrough pipe's node is hung once it has sent nothing for the
// timeout while commands wait, not once the oldest has waited that long:
// one client's pipeline of big values may take longer than the timeout to
// come through, and the commands behind it were sent with it. A bucket
// pipe's calls keep their own deadline.
func TestPipeNodeSendingIsNotHung(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	for _, bucket := range []bool{false, true} {
		p := secondPipe(bucket)
		var got []string
		p.send(answered("*1\r\n$4\r\nPING\r\n", 1, &got))
		p.send(answered("*1\r\n$4\r\nPING\r\n", 1, &got))
		p.Sent(t0)
		if d, ok := p.Deadline(); !ok || !d.Equal(t0.Add(time.Second)) {
			t.Fatalf("bucket %v: deadline %v, %v before anything is heard, want the oldest's %v", bucket, d, ok, t0.Add(time.Second))
		}
		// The first reply's first bytes, 800 ms on: the node is sending.
		p.Heard(t0.Add(800 * time.Millisecond))
		if err := p.Feed(copy(p.ReadBuf(3), "+PO")); err != nil {
			t.Fatal(err)
		}
		want := t0.Add(1800 * time.Millisecond)
		if bucket {
			want = t0.Add(time.Second)
		}
		if d, ok := p.Deadline(); !ok || !d.Equal(want) {
			t.Fatalf("bucket %v: deadline %v, %v once the node sent bytes 800ms on, want %v", bucket, d, ok, want)
		}
	}
}

// secondPipe is a passthrough pipe, or a bucket pipe, whose node is hung
// a second after it is owed a reply.
func secondPipe(bucket bool) *Pipe {
	c := &Cluster{}
	p := c.NewPipe("127.0.0.1:1", false, false)
	if bucket {
		p = c.NewBucketPipe("127.0.0.1:1")
	}
	p.timeout = time.Second
	return p
}

// A passthrough pipe's node that is taking a long command's bytes, a
// write at a time, is not hung: its hang counts from the last bytes it
// took, then from the command's last byte. A bucket pipe's deadline stays
// its call's own. Bytes taken after a command that went whole count for
// nothing (a hung node's socket takes them until its buffers are full).
func TestPipeNodeTakingALongCommandIsNotHung(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	long := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$200000\r\n" + strings.Repeat("v", 200000) + "\r\n"
	for _, bucket := range []bool{false, true} {
		p := secondPipe(bucket)
		var got []string
		p.send(answered(long, 1, &got))
		p.Sent(t0)
		want := func(step string, ms, bucketMs int) {
			t.Helper()
			if bucket {
				ms = bucketMs
			}
			if d, ok := p.Deadline(); !ok || !d.Equal(at(ms)) {
				t.Fatalf("bucket %v, %s: deadline %v, %v, want %v", bucket, step, d, ok, at(ms))
			}
		}
		want("sent", 1000, 1000)
		p.Wrote(64<<10, at(600))
		want("part of it taken 600 ms on", 1600, 1000)
		p.Wrote(64<<10, at(1200))
		want("more taken 1200 ms on", 2200, 1000)
		p.Wrote(len(p.Out()), at(1900))
		want("its last byte taken 1900 ms on", 2900, 1000)
		// A small command after it, written whole: the node taking it
		// says nothing of the long one, which still waits.
		p.send(answered("*1\r\n$4\r\nPING\r\n", 1, &got))
		p.Sent(at(2500))
		p.Wrote(len(p.Out()), at(2500))
		want("a PING taken 2500 ms on", 2900, 1000)
		if err := p.Feed(copy(p.ReadBuf(5), "+OK\r\n")); err != nil {
			t.Fatal(err)
		}
		want("the SET answered", 3500, 3500)
	}
}

// A command written whole counts from when it was sent, however long its
// pipe then takes bytes of the commands after it: a node stopped with its
// socket open takes a trickle of commands into its buffers for minutes.
func TestPipeTrickleDoesNotHideAHungNode(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
	p.timeout = time.Second
	var got []string
	p.send(answered("*1\r\n$4\r\nPING\r\n", 1, &got))
	p.Sent(t0)
	p.Wrote(len(p.Out()), t0)
	for ms := 100; ms <= 900; ms += 100 {
		now := t0.Add(time.Duration(ms) * time.Millisecond)
		p.send(answered("*1\r\n$4\r\nPING\r\n", 1, &got))
		p.Sent(now)
		p.Wrote(len(p.Out()), now)
	}
	if d, ok := p.Deadline(); !ok || !d.Equal(t0.Add(time.Second)) {
		t.Fatalf("deadline %v, %v after a trickle of PINGs, want the first's %v", d, ok, t0.Add(time.Second))
	}
}

// bucketRound is a round of 100 THROTTLEs (made with KeyRequest, as the
// proxy makes them) decided on a loop's bucket pipe: the script calls
// encoded, their replies fed and read back. It reports what went wrong.
func bucketRound(tb testing.TB) (round func() error, res []Result) {
	// Detection off: a benchmark's rounds would make every key hot.
	c, p, via, _ := pipeOf(tb, ClusterConfig{HotThreshold: -1})
	reqs := make([]Request, 100)
	for i := range reqs {
		reqs[i] = KeyRequest(Take, fmt.Appendf(nil, "user:%d", i))
		reqs[i].Interval, reqs[i].Cost = bucket.Interval{Capacity: 10, U: 1, V: 1}, 1
	}
	res = make([]Result, len(reqs))
	var reply []byte
	for _, n := range []int{maxPipeline, len(reqs) - maxPipeline} {
		reply = fmt.Appendf(reply, "*%d\r\n", 5*n)
		for range n {
			reply = append(reply, ":0\r\n:9\r\n:0\r\n:100\r\n:1\r\n"...)
		}
	}
	decided := 0
	done := func(idx []int) { decided += len(idx) }
	return func() error {
		decided = 0
		c.SubmitVia(context.Background(), via, c.Map(), reqs, res, done)
		p.Wrote(len(p.Out()), time.Now())
		if err := p.Feed(copy(p.ReadBuf(len(reply)), reply)); err != nil {
			return err
		}
		if decided != len(reqs) {
			return fmt.Errorf("%d of %d requests decided", decided, len(reqs))
		}
		return nil
	}, res
}

// A bucket call's reply is read where the pipe's buffer holds it (Feed):
// what its decision keeps, a script's error for a key, must be its own
// copy, or the next reply, read into the same buffer, rewrites it.
func TestBucketErrorOutlivesItsReply(t *testing.T) {
	c, p, via, _ := pipeOf(t, ClusterConfig{HotThreshold: -1})
	round := func(key string) []Result {
		reqs := []Request{KeyRequest(Take, []byte(key))}
		reqs[0].Interval, reqs[0].Cost = bucket.Interval{Capacity: 10, U: 1, V: 1}, 1
		res := make([]Result, 1)
		c.SubmitVia(context.Background(), via, c.Map(), reqs, res, func([]int) {})
		return res
	}
	first, second := round("a"), round("b")
	p.Wrote(len(p.Out()), time.Now())
	const msg = "WRONGTYPE Operation against a key holding the wrong kind of value"
	feed := func(reply string) {
		if err := p.Feed(copy(p.ReadBuf(len(reply)), reply)); err != nil {
			t.Fatal(err)
		}
	}
	feed(fmt.Sprintf("*5\r\n:3\r\n$%d\r\n%s\r\n:0\r\n:0\r\n:0\r\n", len(msg), msg))
	if first[0].Err == nil || first[0].Err.Error() != msg {
		t.Fatalf("got %v, want %s", first[0].Err, msg)
	}
	feed("*5\r\n:0\r\n:9\r\n:0\r\n:100\r\n:1\r\n")
	if second[0].Err != nil || second[0].Remaining != 9 {
		t.Fatalf("the second call: %+v, want 9 remaining", second[0])
	}
	if got := first[0].Err.Error(); got != msg {
		t.Fatalf("the first call's error, after the next reply: got %q, want %q", got, msg)
	}
}

// Deciding on a loop's bucket pipe allocates per round and per script
// call, not per request: a round of 100 THROTTLEs costs a few
// allocations, where one per request would be 100.
func TestBucketRoundAllocations(t *testing.T) {
	round, res := bucketRound(t)
	var err error
	allocs := testing.AllocsPerRun(40, func() {
		if e := round(); e != nil && err == nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Remaining != 9 || r.Source != SourceCluster {
			t.Fatalf("request %d: %+v, want 9 remaining from the cluster", i, r)
		}
	}
	if allocs > 25 {
		t.Fatalf("%.0f allocations per round of 100 bucket requests, want a few", allocs)
	}
}

// A script call's list of steps goes back to its pipe once they are
// settled, and keeps nothing of them there: a spare list still pointing
// at a finished round would keep its requests and results alive for as
// long as the loop's connection lives.
func TestBucketSpareKeepsNoFinishedCalls(t *testing.T) {
	c, p, via, _ := pipeOf(t, ClusterConfig{HotThreshold: -1})
	reqs := make([]Request, 2*maxPipeline)
	for i := range reqs {
		reqs[i] = KeyRequest(Take, fmt.Appendf(nil, "user:%d", i))
		reqs[i].Interval, reqs[i].Cost = bucket.Interval{Capacity: 10, U: 1, V: 1}, 1
	}
	res := make([]Result, len(reqs))
	decided := 0
	c.SubmitVia(context.Background(), via, c.Map(), reqs, res, func(idx []int) { decided += len(idx) })
	p.Wrote(len(p.Out()), time.Now())
	one := strings.Repeat(":0\r\n:9\r\n:0\r\n:100\r\n:1\r\n", maxPipeline)
	reply := fmt.Sprintf("*%d\r\n%s*%d\r\n%s", 5*maxPipeline, one, 5*maxPipeline, one)
	if err := p.Feed(copy(p.ReadBuf(len(reply)), reply)); err != nil {
		t.Fatal(err)
	}
	if decided != len(reqs) {
		t.Fatalf("%d of %d requests decided", decided, len(reqs))
	}
	if len(p.spare) != 2 {
		t.Fatalf("%d spare lists after two script calls were answered, want 2", len(p.spare))
	}
	for _, l := range p.spare {
		for k, q := range l[:cap(l)] {
			if q.g != nil || q.hot != nil {
				t.Fatalf("a spare list still holds a settled step at %d", k)
			}
		}
	}
}

// BenchmarkBucketRound is a decision's own work on a loop's bucket pipe,
// besides its syscalls: a round of 100 THROTTLEs, encoded into script
// calls, and their replies read back.
func BenchmarkBucketRound(b *testing.B) {
	round, _ := bucketRound(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := round(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPipeFeedBigArray is a 50,000-element array reply (a big KEYS
// or LRANGE) reaching an event loop's pipe in 16 KB reads: each read
// scans the bytes it brought, not the reply from its start again.
func BenchmarkPipeFeedBigArray(b *testing.B) {
	big := []byte("*50000\r\n" + strings.Repeat("$10\r\nkey:000000\r\n", 50000))
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	for b.Loop() {
		var got []string
		p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
		p.send(answered("*1\r\n$4\r\nKEYS\r\n", 1, &got))
		for at := 0; at < len(big); at += 16 << 10 {
			if err := p.Feed(copy(p.ReadBuf(16<<10), big[at:min(at+16<<10, len(big))])); err != nil {
				b.Fatal(err)
			}
		}
		if len(got) != 1 || len(got[0]) != len(big) {
			b.Fatalf("%d replies", len(got))
		}
	}
}

// A big reply read 64 KiB at a time costs the pipe a few times its size
// (the read buffer: sized once by the string's length, up to exactAhead
// past what came, doubled as it fills beyond; the reply, allocated once
// at its size), not the eight times that growth by each read made it.
func TestPipeBigReplyAllocatesAFewTimesItsSize(t *testing.T) {
	// The answer's string copy is the test's own: size more. Measured: a
	// 1 MB reply's read buffer made twice, 3.1 times its size allocated in
	// all (five buffers and 5.2 times before they were sized by the
	// length); 8 MB 7 buffers, 4.1 times (4.9 under -race), where it was
	// 9.5 when each read grew the buffer.
	for _, c := range []struct {
		size, buffers int
		bound         uint64
	}{{1 << 20, 2, 7}, {8 << 20, 7, 7}} {
		size := c.size
		stream := []byte("$" + strconv.Itoa(size) + "\r\n" + strings.Repeat("x", size) + "\r\n")
		p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
		var got []string
		p.send(answered("GET", 1, &got))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		buffers, last := 0, (*byte)(nil)
		for len(stream) > 0 {
			n := min(len(stream), 64<<10)
			buf := p.ReadBuf(n)
			if at := &p.in[:1][0]; at != last {
				buffers, last = buffers+1, at
			}
			if err := p.Feed(copy(buf, stream[:n])); err != nil {
				t.Fatal(err)
			}
			stream = stream[n:]
		}
		runtime.ReadMemStats(&after)
		if len(got) != 1 || len(got[0]) != size+len("$\r\n\r\n")+len(strconv.Itoa(size)) {
			t.Fatalf("%d: %d answers", size, len(got))
		}
		n := after.TotalAlloc - before.TotalAlloc
		t.Logf("%d: %d read buffers, %.1f times its size allocated", size, buffers, float64(n)/float64(size))
		if buffers > c.buffers || n > c.bound*uint64(size) {
			t.Fatalf("a reply of %d: %d read buffers (want at most %d), %d bytes allocated", size, buffers, c.buffers, n)
		}
	}
}

// A long command is written from its own buffer, in as many writes as
// the socket takes, and what is left of it goes before the next command:
// its bytes are never written over, since a redirect sends it again.
func TestPipeWritesALongCommandFromItsOwnBuffer(t *testing.T) {
	var got []string
	p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
	long := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$70000\r\n" + strings.Repeat("v", 70000) + "\r\n"
	ping := "*1\r\n$4\r\nPING\r\n"
	f := answered(long, 1, &got)
	p.send(f)
	if out := p.Out(); len(out) != len(long) || &out[0] != &f.cmd[0] {
		t.Fatalf("out is %d bytes of another buffer, want the command's own %d", len(out), len(long))
	}
	p.Wrote(1000, time.Now())
	p.send(answered(ping, 1, &got))
	p.Wrote(500, time.Now())
	if string(f.cmd) != long {
		t.Fatal("the command's buffer was written over")
	}
	if want := long[1500:] + ping; string(p.Out()) != want {
		t.Fatalf("out holds %d bytes, want the command's last %d then PING", len(p.Out()), len(long)-1500)
	}
	p.Wrote(len(p.Out()), time.Now())
	p.send(answered(ping, 1, &got))
	if string(p.Out()) != ping || string(f.cmd) != long {
		t.Fatalf("after the rest was written: out %q", p.Out())
	}
	if err := p.Feed(copy(p.ReadBuf(21), "+OK\r\n+PONG\r\n+PONG\r\n")); err != nil || len(got) != 3 || got[0] != "+OK\r\n" {
		t.Fatalf("answers %q, %v", got, err)
	}
}

// The pool of SubmitVia's lists keeps none longer than maxPooledKept: a
// round of one huge pipeline would have every later round given its room
// (and clear it).
func TestKeptPoolLetsHugeListsGo(t *testing.T) {
	for range 20 {
		huge := takeKept(4 * maxPooledKept)
		*huge = append(*huge, keptCall{key: "k"})
		giveKept(huge, len(*huge))
		p := takeKept(10)
		if cap(*p) > maxPooledKept {
			t.Fatalf("a list of room %d came back from the pool", cap(*p))
		}
		giveKept(p, 0)
	}
}
