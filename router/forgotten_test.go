package router

import (
	"fmt"
	"testing"

	"go.uber.org/zap"
)

// Primaries that lose their slots leave their counters behind, for when
// they are primaries again; nodes that come back at new addresses (a
// restarted pod) must not pile them up for good.
func TestForgottenPrimariesAreBounded(t *testing.T) {
	c := &Cluster{forgotten: map[string]faults{}, log: zap.NewNop()}
	addr := func(i int) string { return fmt.Sprintf("10.0.%d.%d:6379", i/256, i%256) }
	const n = maxForgotten + 50
	for i := range n {
		s := &shard{addr: addr(i), errors: int64(i), kinds: map[string]int64{"timeout": int64(i)}, lastErr: "i/o timeout"}
		c.mu.Lock()
		c.forget(s)
		c.mu.Unlock()
	}
	if len(c.forgotten) != maxForgotten {
		t.Fatalf("%d forgotten primaries kept, want at most %d", len(c.forgotten), maxForgotten)
	}
	if _, ok := c.forgotten[addr(0)]; ok {
		t.Fatalf("the first primary forgotten is still kept, where newer ones were dropped")
	}
	last, ok := c.forgotten[addr(n-1)]
	if !ok || last.errors != n-1 || last.kinds["timeout"] != n-1 || last.lastErr != "i/o timeout" {
		t.Fatalf("the last primary forgotten kept %+v, %v", last, ok)
	}
}
