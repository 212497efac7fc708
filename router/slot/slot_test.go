package slot

import "testing"

func TestOf(t *testing.T) {
	// Values from Redis's CLUSTER KEYSLOT and its cluster specification.
	for _, tt := range []struct {
		key  string
		want int
	}{
		{"foo", 12182}, {"bar", 5061}, {"123456789", 0x31C3 % Count},
		{"{user1000}.following", Of("user1000")}, {"{user1000}.followers", Of("user1000")},
		{"foo{}{bar}", Of("foo{}{bar}")}, {"foo{{bar}}zap", Of("{bar")}, {"foo{bar}{zap}", Of("bar")},
		{"{", Of("{")}, {"", 0},
	} {
		if got := Of(tt.key); got != tt.want {
			t.Errorf("Of(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
	if Of("foo{}{bar}") == Of("bar") {
		t.Error("an empty {} must not make the next tag count")
	}
}

func TestTagsCoverEverySlot(t *testing.T) {
	tags := NewTags()
	for s, tag := range tags {
		if tag == "" || Of("{"+tag+"}:x") != s || len(tag) > 4 {
			t.Fatalf("slot %d: tag %q maps to %d", s, tag, Of("{"+tag+"}"))
		}
	}
}

func BenchmarkOf(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Of("sluice:{user:12345}:login")
	}
}
