package lua

import (
	"strconv"
	"testing"
)

// parseInt agrees with strconv.ParseInt on what RESP sends (no '+').
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "-1", "42", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
		"-9223372036854775809", "", "-", "1a", "00012", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseInt([]byte(s))
		want, err := strconv.ParseInt(s, 10, 64)
		if len(s) > 0 && s[0] == '+' {
			return // RESP never signs a positive integer
		}
		if ok != (err == nil) || (ok && got != want) {
			t.Fatalf("parseInt(%q) = %d, %v; strconv: %d, %v", s, got, ok, want, err)
		}
	})
}
