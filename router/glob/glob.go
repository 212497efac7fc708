// Package glob matches keys against Redis's glob patterns of '*' (any
// bytes) and '?' (one byte), as sluice's key rules, ACL key patterns and
// hot-key patterns use them. Bytes, not characters, as Redis counts them.
//
// It runs in time linear in the key for each of the pattern's literal
// runs, never backtracking: a client chooses the keys, up to 1 MiB, and a
// matcher that backtracks over several '*' can be made to work for
// seconds on one key, on the event loop that serves it.
package glob

import "strings"

// Match reports whether s matches pattern.
func Match(s, pattern string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return len(s) == len(pattern) && equal(s, pattern)
	}
	// The part before the first '*' is a prefix, the part after the last
	// a suffix; each run between two '*' is matched where it first fits,
	// which leaves the most room for the runs after it.
	pre := pattern[:star]
	if len(s) < len(pre) || !equal(s[:len(pre)], pre) {
		return false
	}
	s, pattern = s[len(pre):], pattern[star+1:]
	last := strings.LastIndexByte(pattern, '*')
	suf := pattern
	if last >= 0 {
		suf, pattern = pattern[last+1:], pattern[:last]
	} else {
		pattern = ""
	}
	if len(s) < len(suf) || !equal(s[len(s)-len(suf):], suf) {
		return false
	}
	s = s[:len(s)-len(suf)]
	for pattern != "" {
		run := pattern
		if i := strings.IndexByte(pattern, '*'); i >= 0 {
			run, pattern = pattern[:i], pattern[i+1:]
		} else {
			pattern = ""
		}
		if run == "" {
			continue
		}
		i := index(s, run)
		if i < 0 {
			return false
		}
		s = s[i+len(run):]
	}
	return true
}

// equal reports whether s, as long as run, matches run, whose '?' match
// any byte.
func equal(s, run string) bool {
	for i := 0; i < len(run); i++ {
		if run[i] != '?' && run[i] != s[i] {
			return false
		}
	}
	return true
}

// index is where run first matches in s, or -1.
func index(s, run string) int {
	if strings.IndexByte(run, '?') < 0 {
		return strings.Index(s, run)
	}
	for i := 0; i+len(run) <= len(s); i++ {
		if equal(s[i:i+len(run)], run) {
			return i
		}
	}
	return -1
}
