package lua_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/lua"
)

// Two steps of one bucket in one batch through a node's own client (one
// pipeline, no split by key), at a node whose script cache is empty and
// that another connection fills between them (a failover or restart, and
// other instances' calls): the first is answered NOSCRIPT, the second
// runs. The first went again as EVAL after the batch, so the node
// decided the later step first: a client's pipelined THROTTLEs of one
// bucket answered out of order.
func TestStepsOfOneKeyKeepTheirOrderAcrossAScriptLoad(t *testing.T) {
	const key = "{noscript}bucket"
	var mu sync.Mutex
	var decided []string // the steps' costs, in the order the node ran them
	decide := func(conn redcon.Conn, cmd redcon.Command) {
		mu.Lock()
		decided = append(decided, string(cmd.Args[7]))
		mu.Unlock()
		conn.WriteArray(4)
		for _, v := range []int64{0, 9, 0, 100} {
			conn.WriteInt64(v)
		}
	}
	var evalshas atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go redcon.Serve(ln, func(conn redcon.Conn, cmd redcon.Command) {
		switch strings.ToUpper(string(cmd.Args[0])) {
		case "HELLO":
			conn.WriteError("ERR unknown command 'HELLO'")
		case "EVALSHA":
			if evalshas.Add(1) == 1 {
				conn.WriteError("NOSCRIPT No matching script. Please use EVAL.")
				return
			}
			decide(conn, cmd)
		case "EVAL":
			decide(conn, cmd)
		default:
			conn.WriteString("OK")
		}
	}, nil, nil)
	cl, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{ln.Addr().String()}, ForceSingleClient: true, DisableCache: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
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
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(decided, ",") != "1,2" {
		t.Fatalf("the node decided the steps of costs %v, want 1 then 2", decided)
	}
}
