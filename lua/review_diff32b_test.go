package lua_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"
	"github.com/tidwall/redcon"
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
	var rec costRecorder
	var evalshas atomic.Int64
	n := newFakeNode(t, func(conn redcon.Conn, cmd redcon.Command) {
		if strings.EqualFold(string(cmd.Args[0]), "EVALSHA") && evalshas.Add(1) == 1 {
			conn.WriteError("NOSCRIPT No matching script. Please use EVAL.")
			return
		}
		rec.decide(conn, cmd)
	})
	cl, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{n.addr()}, ForceSingleClient: true, DisableCache: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	twoStepsInOrder(t, cl, key, &rec)
}
