package proxy

import (
	"fmt"
	"testing"
)

// BenchmarkSplitBySlot: an MGET of 1,000 keys over about 300 slots, the
// fan-out flood's command, split into its parts.
func BenchmarkSplitBySlot(b *testing.B) {
	args := [][]byte{[]byte("MGET")}
	keys := make([]int, 1000)
	for i := range keys {
		keys[i] = len(args)
		args = append(args, fmt.Appendf(nil, "{t%d}k%d", i%300, i))
	}
	var r round
	b.ReportAllocs()
	for b.Loop() {
		r.fwd, r.cmds = r.fwd[:0], r.cmds[:0]
		splitBySlot(&r, args, keys, 1, true)
	}
}
