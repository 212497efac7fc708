package slot

import (
	"math/rand/v2"
	"testing"
)

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

// bitwise is CRC16/XMODEM as the cluster specification defines it, bit by
// bit, and keySlot Redis's keyHashSlot (src/cluster.c) as written: what the
// table-driven Of must agree with for any key.
func bitwise(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c ^= uint16(s[i]) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
	}
	return c
}

func keySlot(key string) int {
	s := 0
	for s < len(key) && key[s] != '{' {
		s++
	}
	if s == len(key) {
		return int(bitwise(key) & 0x3FFF)
	}
	e := s + 1
	for e < len(key) && key[e] != '}' {
		e++
	}
	if e == len(key) || e == s+1 {
		return int(bitwise(key) & 0x3FFF)
	}
	return int(bitwise(key[s+1:e]) & 0x3FFF)
}

func TestOfAgreesWithRedisAtEveryLength(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab{}:\x00\xff"
	for n := range 80 {
		for range 200 {
			b := make([]byte, n)
			for i := range b {
				if r.IntN(4) == 0 {
					b[i] = alphabet[r.IntN(len(alphabet))]
				} else {
					b[i] = byte(r.Uint32())
				}
			}
			if got, want := Of(string(b)), keySlot(string(b)); got != want {
				t.Fatalf("Of(%q) = %d, want %d", b, got, want)
			}
		}
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
	for _, key := range []string{"sluice:{user:12345}:login", "key:000000012345", "session:9f86d081884c7d659a2feaa0c55ad015"} {
		b.Run(key, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Of(key)
			}
		})
	}
}
