package router

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/slot"
)

// A marker that keeps its split's name but names other tags (forged
// through passthrough: split.lua never changes a split's tags) is read
// as the split it names, its sub-buckets those of its own tags: read as
// the split before, fewer tags indexed past them when the first
// sub-bucket's shard was down (a panic in StandInKey), and more decided
// the extra sub-buckets on stand-ins with every shard healthy.
func TestMarkerRenamedTagsIsReadAsItsOwn(t *testing.T) {
	down, up := &shard{addr: "down"}, &shard{addr: "up"}
	up.healthy.Store(true)
	topo := &topology{}
	topo.setOwners(0, slot.Count-1, up)
	topo.setOwners(slot.Of("{a}"), slot.Of("{a}"), down)
	for _, tags := range [][]string{{"a"}, {"a", "b", "c", "d"}} {
		hk := newHotKey("k", false)
		now := time.Now().UnixNano()
		hk.setSplit(lua.Split{Tags: []string{"a", "b", "c"}, Gen: "g", Base: "0", TTL: time.Hour}, now)
		sp := lua.Split{Tags: tags, Gen: "g", Base: "0", TTL: time.Hour}
		hk.setSplit(sp, now)
		st := hk.split.Load()
		if len(st.keys) != len(tags) || len(st.slots) != len(tags) {
			t.Fatalf("tags %q read with %d keys and %d slots", tags, len(st.keys), len(st.slots))
		}
		for i := range tags {
			key, _, at, ok := st.place(hk, i, topo)
			want := sp.SubKey(i, "k")
			if i == 0 {
				want = sp.StandInKey(0, min(1, len(tags)-1), "k")
			}
			if len(tags) > 1 && (!ok || key != want) || len(tags) == 1 && ok {
				t.Errorf("tags %q: sub-bucket %d placed at %q (sibling %d, %v), want %q", tags, i, key, at, ok, want)
			}
		}
	}
}
