//go:build linux

package proxy

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzLoopReadHugeMax is FuzzLoopRead under a hugeFramer: bulk lengths
// near a long's bound, however the bytes are cut into reads.
func FuzzLoopReadHugeMax(f *testing.F) {
	f.Add([]byte("PING\r\n*1\r\n$9223372036854775805\r\nabc"), uint16(3), uint8(0))
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$9223372036854775790\r\nab\r\nPING\r\n"), uint16(5), uint8(0))
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$40000\r\n"+strings.Repeat("y", 40000)+"\r\n*1\r\n$9223372036854775000\r\n"), uint16(5000), uint8(7))
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16, slack uint8) {
		whole := loopAnswers(t, stream, len(stream)+1, hugeFramer(slack))
		step := max(int(cut)%(24<<10)+1, len(stream)/2000)
		if got := loopAnswers(t, stream, step, hugeFramer(slack)); !bytes.Equal(got, whole) {
			t.Fatalf("reads of %d bytes answered %.200q; one read answered %.200q", step, got, whole)
		}
	})
}
