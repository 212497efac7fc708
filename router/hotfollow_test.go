package router

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/lua"
)

// A parent's answer naming an older split, read before a newer one was
// and handled after it (its reply came late), leaves the newer one in
// force: taken, it would send the key's calls to sub-buckets a reset
// emptied, or lose what was seen of the newer split's; and a late answer
// of the split in force does not cut short the time a later one gave it.
// An answer asked once the split in force ended is taken, though.
func TestSplitFollowKeepsTheNewerReading(t *testing.T) {
	h := newHotSet(ClusterConfig{HotCooldown: time.Minute})
	const key = "late"
	now := time.Now()
	gen := func(at time.Time) string { return strconv.FormatInt(at.UnixMilli(), 16) }
	older := lua.Split{Tags: []string{"a", "b"}, Gen: gen(now.Add(-time.Second)), Base: "0", TTL: 2 * time.Second}
	newer := lua.Split{Tags: []string{"a", "b"}, Gen: gen(now), Base: "0", TTL: 2 * time.Second}

	hk := h.follow(key, newer, now.UnixNano())
	st := hk.split.Load()
	st.seen.fullAt[0].Store(now.UnixMicro() + 1)
	h.follow(key, older, now.Add(-10*time.Millisecond).UnixNano())
	if got := hk.split.Load(); got.gen != newer.Gen || got.seen != st.seen {
		t.Fatalf("after a late answer of split %s: split %s in force, want %s as it was", older.Gen, got.gen, newer.Gen)
	}

	h.follow(key, newer, now.Add(-20*time.Millisecond).UnixNano())
	if got := hk.split.Load(); got.until < st.until {
		t.Fatalf("after a late answer of the split in force: until %d, want at least %d", got.until, st.until)
	}

	// Asked after the split in force ended, the parent's answer is the
	// split it holds now, whatever its name (its clock may have gone back).
	h.follow(key, older, hk.split.Load().until)
	if got := hk.split.Load(); got.gen != older.Gen {
		t.Fatalf("after an answer asked once split %s ended: split %s in force, want %s", newer.Gen, got.gen, older.Gen)
	}
}
