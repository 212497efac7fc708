// Package glob matches keys against Redis's glob patterns, as sluice's key
// rules, ACL key patterns and hot-key patterns use them: '*' (any bytes),
// '?' (one byte), classes '[abc]', '[^abc]', '[a-z]' and '\' escapes,
// every edge case read as Redis's stringmatchlen (src/util.c) reads it,
// with nocase off. Bytes, not characters, as Redis counts them.
//
// It never backtracks: a client chooses the keys, up to 1 MiB, and a
// matcher that backtracks over several '*' can be made to work for
// seconds on one key, on the event loop that serves it. The pattern is
// cut at its '*' into segments of fixed length, each found where it first
// fits: in time linear in the key for a segment of up to 64 bytes matched
// (and for any run of plain bytes), at worst the key's length times the
// segment's.
package glob

import "strings"

// maxStars is how many '*' (runs of them) Redis follows before it gives
// up: stringmatchlen recurses once for each, and since Redis 7.2.6 (the fix
// of CVE-2024-31228; 7.0 had no limit) refuses deeper than 1000. A pattern
// whose 1001st '*' is followed by anything matches nothing.
const maxStars = 1000

// Match reports whether s matches pattern.
//
// One difference from stringmatchlen, which matches "" to no pattern but
// "": the pattern "*" matches "", as Redis's KEYS, SCAN and ACL (~*) take
// it, each special-casing it before stringmatchlen.
func Match(s, pattern string) bool {
	return match(s, pattern, bitapMin)
}

// match is Match, with the shortest key bitap is used for (the tests try
// it on short keys too).
func match(s, pattern string, bitapMin int) bool {
	if pattern == "*" {
		return true
	}
	if s == "" {
		return pattern == ""
	}
	// The segment before the first '*' is a prefix, the one after the
	// last a suffix; each segment between two '*' is matched where it
	// first fits, which leaves the most room for those after it.
	seg, rest, star := cut(pattern)
	n := atoms(seg)
	if !star {
		return len(s) == n && at(s, seg)
	}
	if len(s) < n || !at(s, seg) {
		return false
	}
	s = s[n:]
	for stars := 1; rest != ""; stars++ {
		if stars > maxStars {
			return false
		}
		seg, rest, star = cut(rest)
		n = atoms(seg)
		if !star {
			return len(s) >= n && at(s[len(s)-n:], seg)
		}
		i := index(s, seg, n, bitapMin)
		if i < 0 {
			return false
		}
		s = s[i+n:]
	}
	return true // the pattern ends in '*'
}

// cut splits p at its first '*' (a run of them), not counting those in a
// class or escaped: seg is what comes before, rest what comes after, and
// star whether there was one.
func cut(p string) (seg, rest string, star bool) {
	for i := 0; i < len(p); {
		switch p[i] {
		case '*':
			j := i + 1
			for j < len(p) && p[j] == '*' {
				j++
			}
			return p[:i], p[j:], true
		case '\\':
			i = min(i+2, len(p)) // a trailing '\' is itself
		case '[':
			_, i = class(p, i+1, 0)
		default:
			i++
		}
	}
	return p, "", false
}

// atoms is how many bytes seg, a segment with no '*', matches.
func atoms(seg string) int {
	if !strings.ContainsAny(seg, `[\`) {
		return len(seg)
	}
	n := 0
	for i := 0; i < len(seg); n++ {
		i = next(seg, i)
	}
	return n
}

// next is where the atom of seg at i ends.
func next(seg string, i int) int {
	switch seg[i] {
	case '\\':
		return min(i+2, len(seg))
	case '[':
		_, i = class(seg, i+1, 0)
		return i
	}
	return i + 1
}

// at reports whether s begins with what seg, a segment with no '*',
// matches; s is at least atoms(seg) long.
func at(s, seg string) bool {
	j := 0
	for i := 0; i < len(seg); j++ {
		switch seg[i] {
		case '?':
			i++
		case '[':
			var ok bool
			ok, i = class(seg, i+1, s[j])
			if !ok {
				return false
			}
		case '\\':
			if i+1 < len(seg) {
				i++
			}
			fallthrough
		default:
			if seg[i] != s[j] {
				return false
			}
			i++
		}
	}
	return true
}

// class reads the class of p that starts at i, just after its '[', as
// stringmatchlen reads it: it reports whether c is in it and where it ends.
// A class with no ']' runs to the end of p; '\' escapes the byte after it;
// "x-y" is a range, reversed or not, unless it would end the class early
// ("[a-]" is a range from 'a' to ']', and unclosed); ranges compare bytes
// as C's signed char, as Redis does on x86 and most other hosts.
func class(p string, i int, c byte) (match bool, end int) {
	not := i < len(p) && p[i] == '^'
	if not {
		i++
	}
	for {
		switch rem := len(p) - i; {
		case rem >= 2 && p[i] == '\\':
			match = match || p[i+1] == c
			i += 2
		case rem == 0:
			return match != not, i
		case p[i] == ']':
			return match != not, i + 1
		case rem >= 3 && p[i+1] == '-':
			lo, hi := int8(p[i]), int8(p[i+2])
			if lo > hi {
				lo, hi = hi, lo
			}
			match = match || (int8(c) >= lo && int8(c) <= hi)
			i += 3
		default:
			match = match || p[i] == c
			i++
		}
	}
}

// index is where seg, of n atoms, first matches in s, or -1. A segment of
// classes or '?' is looked for in time linear in s when it has no more
// than 64 atoms and s is at least bitapMin long (shorter ones are quicker
// tried at each byte), else in s's length times seg's.
func index(s, seg string, n, bitapMin int) int {
	if !strings.ContainsAny(seg, `?[\`) {
		return strings.Index(s, seg)
	}
	if n <= 64 && len(s) >= bitapMin {
		return bitap(s, seg, n)
	}
	// A segment that starts with a plain byte is looked for only where
	// that byte is.
	first := -1
	if c := seg[0]; c != '?' && c != '[' && c != '\\' {
		first = int(c)
	}
	for i := 0; i+n <= len(s); i++ {
		if first >= 0 {
			j := strings.IndexByte(s[i:len(s)-n+1], byte(first))
			if j < 0 {
				return -1
			}
			i += j
		}
		if at(s[i:], seg) {
			return i
		}
	}
	return -1
}

// bitapMin is the shortest key bitap is used for: below it, building its
// table costs more than it saves.
const bitapMin = 1024

// bitap finds seg, of n (1 to 64) atoms, in s by shift-and: bit k of a
// byte's mask says that atom k matches the byte, and bit k of d that the
// segment's first k+1 atoms match the bytes up to the one just read.
func bitap(s, seg string, n int) int {
	var mask [256]uint64
	for i, k := 0, 0; i < len(seg); k++ {
		bit := uint64(1) << k
		switch seg[i] {
		case '?':
			for c := range mask {
				mask[c] |= bit
			}
			i++
		case '[':
			end := i
			for c := range mask {
				var ok bool
				if ok, end = class(seg, i+1, byte(c)); ok {
					mask[c] |= bit
				}
			}
			i = end
		case '\\':
			if i+1 < len(seg) {
				i++
			}
			fallthrough
		default:
			mask[seg[i]] |= bit
			i++
		}
	}
	var d uint64
	last := uint64(1) << (n - 1)
	for j := 0; j < len(s); j++ {
		d = (d<<1 | 1) & mask[s[j]]
		if d&last != 0 {
			return j - n + 1
		}
	}
	return -1
}

// Split cuts a list of patterns at each sep that separates them: not one
// escaped by '\' or in a class, where it is part of a pattern (so that
// "a[,;]*,b" is two patterns). A class with no ']' runs to the end of the
// list, as it runs to the end of a pattern.
func Split(list string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(list); {
		switch list[i] {
		case sep:
			out = append(out, list[start:i])
			i++
			start = i
		case '\\':
			i = min(i+2, len(list))
		case '[':
			_, i = class(list, i+1, 0)
		default:
			i++
		}
	}
	return append(out, list[start:])
}
