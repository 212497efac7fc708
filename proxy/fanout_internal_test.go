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
