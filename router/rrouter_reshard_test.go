package router_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// A checked command (Forward.Primary) whose node lost the checked slot to
// a resharding, not a failover, ran there on a primary: its check's MOVED
// is to another primary, and sending it again there would run it twice
// (a keyless script's write, then a second run that fails on the key it
// does not hold). Its answer is the node's own, as an unchecked one's.
func TestCheckedCommandAfterAReshardRunsOnce(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 2, Replicas: -1})
	r := newRouter(t, c.Addrs(), router.ClusterConfig{TopologyInterval: time.Hour})
	waitConnected(t, r)
	ctx := context.Background()
	a, err := c.Primary(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b *clustertest.Node
	for _, n := range c.Nodes {
		if n != a {
			b = n
		}
	}
	// A key of a's, in another slot than 0.
	key := ""
	for i := 0; key == ""; i++ {
		k := "reshard:" + strconv.Itoa(i)
		if sl := slot.Of(k); sl != 0 {
			if n, err := c.Primary(ctx, sl); err == nil && n == a {
				key = k
			}
		}
	}
	if err := c.MoveSlot(ctx, 0, b); err != nil {
		t.Fatal(err)
	}
	script := "return redis.call('INCR', '" + key + "')"
	cmd := router.AppendCommand(nil, [][]byte{[]byte("EVAL"), []byte(script), []byte("0")})
	replies := make([][]byte, 1)
	got := make(chan struct{})
	r.Forward(ctx, nil, []router.Forward{{Slot: 0, Cmd: cmd, Primary: true}}, replies, func([]int) { close(got) })
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no reply")
	}
	if string(replies[0]) != ":1\r\n" {
		t.Errorf("EVAL on the primary that gave slot 0 away: %q, want :1 (its own answer)", replies[0])
	}
	if v, err := a.Do(ctx, "GET", key).ToString(); err != nil || v != "1" {
		t.Errorf("%s on %s: %q %v, want 1", key, a.Addr, v, err)
	}
}
