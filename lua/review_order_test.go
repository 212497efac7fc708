package lua_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/lua"
)

// Two resets of one bucket in one batch (a client's pipelined
// THROTTLE.RESET k, THROTTLE.RESET k), at the node that gives the
// bucket's slot away between them: the first is answered ASK, the second
// MOVED. rueidis sends the MOVED ones again first, so the second reset
// ran first at the new owner and took the bucket: the first answered
// "none", the second "deleted", where Redis, running them in order,
// answers the first 1 and the second 0.
func TestResetsOfOneKeyKeepTheirOrderAcrossRedirects(t *testing.T) {
	const key = "{redirect}reset"
	var mu sync.Mutex
	held := true // the new owner holds the bucket until a reset deletes it
	to := newFakeNode(t, func(conn redcon.Conn, _ redcon.Command) {
		mu.Lock()
		defer mu.Unlock()
		if held {
			held = false
			conn.WriteBulkString("0")
			return
		}
		conn.WriteNull()
	})
	cl := endingMove(t, key, to)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := lua.NewResetter().Reset(ctx, cl, []string{key, key})
	if len(res) != 2 {
		t.Fatalf("%d results, want 2", len(res))
	}
	first, err := res[0].ToString()
	if err != nil || first != "0" {
		t.Errorf("first reset: %q, %v: want the bucket it deleted", first, err)
	}
	if err := res[1].Error(); !rueidis.IsRedisNil(err) {
		t.Errorf("second reset: %v: want nil, the bucket gone with the first", err)
	}
}
