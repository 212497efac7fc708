package glob

import (
	"strings"
	"testing"
	"time"
)

// reference is the textbook recursive matcher: exponential, but plainly
// right, for short inputs.
func reference(s, p string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if reference(s[i:], p[1:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && reference(s[1:], p[1:])
	}
	return s != "" && s[0] == p[0] && reference(s[1:], p[1:])
}

func TestMatch(t *testing.T) {
	for _, tt := range []struct {
		s, p string
		want bool
	}{
		{"api:free:1", "api:free:*", true},
		{"api:free:1", "api:*", true},
		{"api:paid:1", "api:free:*", false},
		{"abc", "a?c", true},
		{"ac", "a?c", false},
		{"", "*", true},
		{"", "", true},
		{"x", "", false},
		{"aXbXc", "*b*c", true},
		{"ab", "a*b*", true},
		{"abab", "*ab", true},
		{"aba", "ab*ba", false}, // prefix and suffix would overlap
		{"ababa", "ab*ba", true},
		{"t:é", "t:?", false}, // é is two bytes, as Redis counts
		{"t:é", "t:??", true},
		{"[x]", "[x]", true}, // no classes: brackets are bytes
	} {
		if got := Match(tt.s, tt.p); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.s, tt.p, got, tt.want)
		}
	}
}

// A key built to make a backtracking matcher work for seconds is matched
// at once.
func TestMatchDoesNotBacktrack(t *testing.T) {
	key := "t:" + strings.Repeat(":a:", 300_000) + ":rate"
	start := time.Now()
	Match(key, "t:*:a:*:b:*:c:*:rate")
	Match(key, "t:*:?:*:b?:*:c:*:rate")
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("two matches of a %d-byte key took %v", len(key), d)
	}
}

func FuzzMatch(f *testing.F) {
	for _, seed := range [][2]string{{"api:free:1", "api:*"}, {"abab", "*a?*b"}, {"", "**"}, {"a*b", "a\\*b"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, s, p string) {
		if len(s) > 24 || len(p) > 12 {
			return // the reference is exponential
		}
		if got, want := Match(s, p), reference(s, p); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference %v", s, p, got, want)
		}
	})
}
