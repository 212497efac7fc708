package proxy

import "testing"

// A cluster of more primaries than a cursor's low bits can name is
// refused SCAN: past the 256th, the next primary's first cursor would
// read as the first primary's, and the scan would never end.
func TestScanCursorOfTooManyPrimaries(t *testing.T) {
	if _, _, err := scanCursor([]byte("0"), 1<<scanNodeBits+1); err == nil {
		t.Fatal("SCAN 0 over 257 primaries: no error")
	}
	if cur, node, err := scanCursor([]byte("0"), 1<<scanNodeBits); err != nil || cur != 0 || node != 0 {
		t.Fatalf("SCAN 0 over 256 primaries: %d, %d, %v", cur, node, err)
	}
}

// An empty cursor is 0 to Redis 7.0 (strtoul reads nothing, and stops at
// the end): SCAN "" starts a scan, as on a node.
func TestScanCursorEmptyIsZero(t *testing.T) {
	if cur, node, err := scanCursor([]byte(""), 3); err != nil || cur != 0 || node != 0 {
		t.Fatalf(`SCAN "": %d, %d, %v`, cur, node, err)
	}
	for _, bad := range []string{"abc", " 1", "1 ", "18446744073709551616"} {
		if _, _, err := scanCursor([]byte(bad), 3); err == nil || err.Error() != "invalid cursor" {
			t.Errorf("SCAN %q: %v, want invalid cursor", bad, err)
		}
	}
}

// KEYS's reply is every primary's array in one, its elements as they
// are; and sluice copies them once, not into an allocation each, which
// for a key space of millions made it hold ten times the reply.
func TestKeysConcatenatesWithoutSplitting(t *testing.T) {
	it := fwdItem{how: mergeConcat}
	parts := [][]byte{[]byte("*2\r\n$1\r\na\r\n$2\r\nbb\r\n"), []byte("*0\r\n"), []byte("*1\r\n$3\r\nccc\r\n")}
	if got, want := string(it.merged(parts)), "*3\r\n$1\r\na\r\n$2\r\nbb\r\n$3\r\nccc\r\n"; got != want {
		t.Fatalf("KEYS merged: %q, want %q", got, want)
	}
	for _, bad := range []string{"*-1\r\n", ":1\r\n", "*x\r\n"} {
		if got := string(it.merged([][]byte{parts[0], []byte(bad)})); got[0] != '-' {
			t.Errorf("KEYS merged with a part %q: %q, want an error", bad, got)
		}
	}
	var big []byte
	for range 10000 {
		big = append(big, "$6\r\nkey:42\r\n"...)
	}
	big = append([]byte("*10000\r\n"), big...)
	if n := testing.AllocsPerRun(10, func() { it.merged([][]byte{big, big, big}) }); n > 5 {
		t.Fatalf("KEYS of 30,000 keys: %v allocations", n)
	}
}
