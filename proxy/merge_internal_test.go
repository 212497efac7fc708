package proxy

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// An MGET split over slots is merged into a reply allocated once at its
// size: grown by append, 30 MB of values allocated about five times that.
func TestMergedMGETAllocatesItsSize(t *testing.T) {
	const parts, each = 8, 1 << 20
	value := "$" + strconv.Itoa(each) + "\r\n" + strings.Repeat("v", each) + "\r\n"
	replies := make([][]byte, parts)
	order := make([]int, parts)
	var want []byte
	want = appendArrayHeader(want, parts)
	for i := range replies {
		replies[i] = []byte("*1\r\n" + value)
		order[i] = parts - 1 - i
		want = append(want, value...)
	}
	it := &fwdItem{how: mergeArray, order: order}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := it.merged(replies)
	runtime.ReadMemStats(&after)
	if !bytes.Equal(got, want) {
		t.Fatalf("merged %.40q..., want %.40q...", got, want)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 3*uint64(len(want))/2 {
		t.Fatalf("allocated %d bytes for a reply of %d", n, len(want))
	}
}
