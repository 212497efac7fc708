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
