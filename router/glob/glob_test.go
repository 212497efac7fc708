package glob

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// stringmatchlen is Redis's matcher (src/util.c, stringmatchlen_impl,
// nocase off) ported line for line: backtracking, but with Redis's
// skipLongerMatches and nesting limit, and reading past the pattern's end
// as C reads the NUL after an sds. Chars are signed, as on x86.
func stringmatchlen(p, s string) bool {
	skip := false
	return stringmatchlenImpl(p, s, &skip, 0)
}

func stringmatchlenImpl(pattern, str string, skipLongerMatches *bool, nesting int) bool {
	// at is pattern[k], or the NUL after it.
	at := func(k int) byte {
		if k < len(pattern) {
			return pattern[k]
		}
		return 0
	}
	if nesting > 1000 {
		return false
	}
	for len(pattern) > 0 && len(str) > 0 {
		switch pattern[0] {
		case '*':
			for len(pattern) > 0 && at(1) == '*' {
				pattern = pattern[1:]
			}
			if len(pattern) == 1 {
				return true
			}
			for len(str) > 0 {
				if stringmatchlenImpl(pattern[1:], str, skipLongerMatches, nesting+1) {
					return true
				}
				if *skipLongerMatches {
					return false
				}
				str = str[1:]
			}
			*skipLongerMatches = true
			return false
		case '?':
			str = str[1:]
		case '[':
			pattern = pattern[1:]
			not := at(0) == '^'
			if not {
				pattern = pattern[1:]
			}
			match := false
			// pos is how far into the original pattern we are; C steps
			// back one byte at the end, which a Go slice cannot, so it is
			// kept as an offset of the slice instead.
			back := false
			for {
				if at(0) == '\\' && len(pattern) >= 2 {
					pattern = pattern[1:]
					if pattern[0] == str[0] {
						match = true
					}
				} else if at(0) == ']' {
					break
				} else if len(pattern) == 0 {
					back = true
					break
				} else if len(pattern) >= 3 && pattern[1] == '-' {
					start, end, c := int(int8(pattern[0])), int(int8(pattern[2])), int(int8(str[0]))
					if start > end {
						start, end = end, start
					}
					pattern = pattern[2:]
					if c >= start && c <= end {
						match = true
					}
				} else if pattern[0] == str[0] {
					match = true
				}
				pattern = pattern[1:]
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			str = str[1:]
			if back {
				// pattern-- then the pattern++ below: at the end still.
				if len(str) == 0 {
					return true // patternLen 0, stringLen 0
				}
				return false // patternLen 0, stringLen > 0: the loop ends
			}
		case '\\':
			if len(pattern) >= 2 {
				pattern = pattern[1:]
			}
			fallthrough
		default:
			if pattern[0] != str[0] {
				return false
			}
			str = str[1:]
		}
		pattern = pattern[1:]
		if len(str) == 0 {
			for at(0) == '*' {
				pattern = pattern[1:]
			}
			break
		}
	}
	return len(pattern) == 0 && len(str) == 0
}

// reference is what Match should say: stringmatchlen, but for "*", which
// Redis's callers (KEYS, SCAN, ACL ~*) match to every key, "" too.
func reference(s, p string) bool {
	return p == "*" || stringmatchlen(p, s)
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
		{"[x]", "[x]", false}, // a class now, as in Redis
		{"x", "[x]", true},
		{"[x]", `\[x\]`, true},

		// Redis's own edge cases, as stringmatchlen reads them.
		{"", "**", false}, // stringmatchlen matches "" to "" only
		{"", "?", false},
		{"b", "[abc]", true},
		{"d", "[abc]", false},
		{"d", "[^abc]", true},
		{"a", "[^abc]", false},
		{"m", "[a-z]", true},
		{"m", "[z-a]", true}, // reversed ranges are ranges
		{"A", "[a-z]", false},
		{"-", "[a-]", false}, // a range from 'a' to ']', and unclosed
		{"]", "[a-]", true},
		{"^", "[a-]", true},
		{"-", "[-a]", true},
		{"a", "[]a]", false}, // "[]" is empty, then "a]"
		{"a]", "[]a]", false},
		{"x", "[^]", true}, // empty and negated: any byte
		{"x", "[", false},
		{"x", "[^", true},
		{"ab", "[ab", false}, // unclosed: one class to the end
		{"a", "[ab", true},
		{"ab", "a[", false},
		{"]", `[\]]`, true},
		{`\`, `[\]`, false}, // unclosed: '\' and ']' escaped
		{"]", `[\]`, true},
		{`\`, `[a\`, true}, // a trailing '\' in a class is itself
		{"-", `[a\-z]`, true},
		{"m", `[a\-z]`, false},
		{`\`, `\`, true}, // a trailing '\' is itself
		{`a\`, `a\`, true},
		{"*", `\*`, true},
		{"x", `\*`, false},
		{"?", `\?`, true},
		{"x", `\x`, true},
		{"a*b", `a\*b`, true},
		{"axb", `a\*b`, false},
		{"*a", "[*]*", true},
		{"ab", "[*]*", false},
		{"\x80", "[a-\xff]", false}, // C's signed chars: the range is -1 to 'a'
		{"0", "[a-\xff]", true},
		{"\x80", "[\x80-\xff]", true},
		{"key:7:x", "key:[0-9]:*", true},
		{"key:x:x", "key:[0-9]:*", false},
		{"ab", "*[b]", true},
		{"a", "a*[b]", false},
	} {
		if got := Match(tt.s, tt.p); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.s, tt.p, got, tt.want)
		}
		if got := match(tt.s, tt.p, 0); got != tt.want {
			t.Errorf("match(%q, %q) by bitap = %v, want %v", tt.s, tt.p, got, tt.want)
		}
		if ref := reference(tt.s, tt.p); ref != tt.want {
			t.Errorf("reference(%q, %q) = %v, want %v", tt.s, tt.p, ref, tt.want)
		}
	}
}

// Patterns and keys of the bytes that matter to classes, compared with
// the reference many times over: the fuzzer's inputs rarely hold them all.
func TestMatchRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const pb, sb = "ab*?[]^-\\\xff", "ab]^-\\*\x80\xff"
	gen := func(alphabet string, max int) string {
		b := make([]byte, r.IntN(max+1))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 300_000 {
		s, p := gen(sb, 10), gen(pb, 9)
		want := reference(s, p)
		if got := Match(s, p); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference %v", s, p, got, want)
		}
		if got := match(s, p, 0); got != want {
			t.Fatalf("match(%q, %q) by bitap = %v, reference %v", s, p, got, want)
		}
	}
}

// Redis follows 1000 '*' and no more: a pattern whose 1001st is followed
// by anything matches nothing.
func TestMatchNestingLimit(t *testing.T) {
	key := strings.Repeat("a", 2000)
	for _, tt := range []struct {
		p    string
		want bool
	}{
		{strings.Repeat("*a", 1000), true},
		{strings.Repeat("*a", 1000) + "*", true},
		{strings.Repeat("*a", 1000) + "**", true},
		{strings.Repeat("*a", 1001), false},
		{strings.Repeat("*a", 1000) + "*?", false},
		{strings.Repeat("*a", 1000) + "*[a]*", false},
		{strings.Repeat("a*", 1000) + "a", true},
		{strings.Repeat("a*", 1001) + "a", false},
		{strings.Repeat(`\*[*]*`, 1001), false},
	} {
		if got := Match(key, tt.p); got != tt.want {
			t.Errorf("Match(%d a, %d-byte pattern) = %v, want %v", len(key), len(tt.p), got, tt.want)
		}
		if ref := stringmatchlen(tt.p, key); ref != tt.want && !strings.HasPrefix(tt.p, `\`) {
			t.Errorf("stringmatchlen(%d-byte pattern) = %v, want %v", len(tt.p), ref, tt.want)
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
	Match(key, "t:*:[a]:*:[^a]?:*:c:*:rate")
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("three matches of a %d-byte key took %v", len(key), d)
	}
	key = strings.Repeat("a", 1<<20)
	start = time.Now()
	for _, p := range []string{
		"*a*a*a*a*a*a*a*b",
		"*[a]*[a]*a*[ab]*?*[^b]*a*b",
		"*a?a*[a-a]a*\\a*a*[b]",
		"*" + strings.Repeat("[a]", 63) + "b*a", // by bitap
		"*" + strings.Repeat("?", 80) + "b*a",   // tried at each byte
	} {
		if Match(key, p) {
			t.Errorf("Match(1 MiB of a, %q) = true", p)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("five matches of a 1 MiB key took %v", d)
	}
}

func TestSplit(t *testing.T) {
	for _, tt := range []struct {
		list string
		want []string
	}{
		{"", []string{""}},
		{"a,b*", []string{"a", "b*"}},
		{"a,,b", []string{"a", "", "b"}},
		{"a[,;]*,b", []string{"a[,;]*", "b"}},
		{`a\,b,c`, []string{`a\,b`, "c"}},
		{"[^,]x,[a-,]", []string{"[^,]x", "[a-,]"}},
		{"[a-],b", []string{"[a-],b"}}, // a range 'a' to ']', unclosed
		{"a[,b", []string{"a[,b"}},
		{`a\`, []string{`a\`}},
		{"a,", []string{"a", ""}},
	} {
		if got := Split(tt.list, ','); !slices.Equal(got, tt.want) {
			t.Errorf("Split(%q) = %q, want %q", tt.list, got, tt.want)
		}
	}
}

func BenchmarkMatchPathological(b *testing.B) {
	key := strings.Repeat("a", 1<<20)
	b.SetBytes(int64(len(key)))
	for b.Loop() {
		Match(key, "*a*a*a*a*a*a*a*b")
		Match(key, "*[a]*[a]*[a]*[a]*?*a*a*[b]")
		Match(key, "*"+strings.Repeat("[a]", 63)+"b*a")
	}
}

func FuzzMatch(f *testing.F) {
	for _, seed := range [][2]string{
		{"api:free:1", "api:*"}, {"abab", "*a?*b"}, {"", "**"}, {"a*b", "a\\*b"},
		{"a]", "[a-]*"}, {"x", "[^"}, {"ab", "[ab"}, {`\`, `[\]`}, {"0", "[a-\xff]"},
		{"key:7:x", "key:[0-9]:*"}, {"]x", "*[]x]"}, {"a-z", `*[\-]?`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, s, p string) {
		if len(s) > 32 || len(p) > 16 {
			return // the reference backtracks
		}
		want := reference(s, p)
		if got := Match(s, p); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference %v", s, p, got, want)
		}
		if got := match(s, p, 0); got != want {
			t.Fatalf("match(%q, %q) by bitap = %v, reference %v", s, p, got, want)
		}
	})
}
