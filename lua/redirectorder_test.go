package lua_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/slot"
)

// fakeNode is a RESP server that plays one node of a cluster owning every
// slot, for what a real node cannot be made to do at will: change a slot's
// state between two commands of one pipeline.
type fakeNode struct {
	ln   net.Listener
	eval func(conn redcon.Conn, cmd redcon.Command) // EVALSHA and EVAL
}

func newFakeNode(t *testing.T, eval func(conn redcon.Conn, cmd redcon.Command)) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeNode{ln: ln, eval: eval}
	go redcon.Serve(ln, func(conn redcon.Conn, cmd redcon.Command) {
		switch strings.ToUpper(string(cmd.Args[0])) {
		case "HELLO": // RESP2, as a Redis 5 would
			conn.WriteError("ERR unknown command 'HELLO'")
		case "CLUSTER": // SLOTS: every slot here
			host, port, _ := net.SplitHostPort(n.ln.Addr().String())
			p, _ := strconv.Atoi(port)
			conn.WriteArray(1)
			conn.WriteArray(3)
			conn.WriteInt(0)
			conn.WriteInt(16383)
			conn.WriteArray(3)
			conn.WriteBulkString(host)
			conn.WriteInt(p)
			conn.WriteBulkString(strings.Repeat(port[len(port)-1:], 40))
		case "EVALSHA", "EVAL":
			n.eval(conn, cmd)
		default: // ASKING, CLIENT SETINFO, ...
			conn.WriteString("OK")
		}
	}, nil, nil)
	t.Cleanup(func() { ln.Close() })
	return n
}

func (n *fakeNode) addr() string { return n.ln.Addr().String() }

// endingMove is a cluster client that knows one node, which answers the
// first EVALSHA of key ASK to `to` (the slot migrating, the key gone) and
// every later one MOVED (the move has ended).
func endingMove(t *testing.T, key string, to *fakeNode) rueidis.Client {
	t.Helper()
	sl := strconv.Itoa(slot.Of(key))
	var evals atomic.Int64
	from := newFakeNode(t, func(conn redcon.Conn, _ redcon.Command) {
		if evals.Add(1) == 1 {
			conn.WriteError("ASK " + sl + " " + to.addr())
			return
		}
		conn.WriteError("MOVED " + sl + " " + to.addr())
	})
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{from.addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Two steps of one bucket in one batch, at the node that gives the
// bucket's slot away between them: the first is answered ASK (the slot
// is migrating, its key gone), the second MOVED (the move has ended).
// rueidis sends a pipeline's redirected commands again by kind, those
// answered MOVED before those answered ASK, so the second would be
// decided first at the new owner: a client's pipelined THROTTLEs of one
// bucket answered out of order (remaining lower on the earlier call).
func TestStepsOfOneKeyKeepTheirOrderAcrossRedirects(t *testing.T) {
	const key = "{redirect}bucket"
	var rec costRecorder
	twoStepsInOrder(t, endingMove(t, key, newFakeNode(t, rec.decide)), key, &rec)
}

// costRecorder answers each script call as a decision and keeps the costs
// of the steps in the order they were decided.
type costRecorder struct {
	mu    sync.Mutex
	costs []string
}

func (r *costRecorder) decide(conn redcon.Conn, cmd redcon.Command) {
	r.mu.Lock()
	r.costs = append(r.costs, string(cmd.Args[7]))
	r.mu.Unlock()
	conn.WriteArray(4)
	for _, v := range []int64{0, 9, 0, 100} {
		conn.WriteInt64(v)
	}
}

// twoStepsInOrder has cl decide two steps of key in one batch, of costs 1
// then 2, and fails t unless rec decided them in that order.
func twoStepsInOrder(t *testing.T, cl rueidis.Client, key string, rec *costRecorder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := []lua.Call{
		{Key: key, Capacity: 10, U: 1, V: 1, Cost: 1},
		{Key: key, Capacity: 10, U: 1, V: 1, Cost: 2},
	}
	res, errs := make([]lua.Result, len(calls)), make([]error, len(calls))
	lua.NewThrottle().Do(ctx, cl, calls, res, errs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if strings.Join(rec.costs, ",") != "1,2" {
		t.Fatalf("the node decided the steps of costs %v, want 1 then 2", rec.costs)
	}
}
