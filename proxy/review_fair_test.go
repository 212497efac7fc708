package proxy

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/router/reply"
)

// elements gives an array reply's elements as reply.Read reads them, as
// slices of the reply: merging an MGET split over hundreds of slots read
// each part again through a reader of its own (4 KiB) and copied each
// element, most of what the merge cost.
func TestElementsSliceTheReply(t *testing.T) {
	p := []byte("*6\r\n$-1\r\n$3\r\nabc\r\n*2\r\n:1\r\n+x\r\n|1\r\n+k\r\n:2\r\n:3\r\n%1\r\n+a\r\n*1\r\n_\r\n-ERR e\r\n")
	got, ok := elements(p)
	if !ok {
		t.Fatal("not an array")
	}
	br := bufio.NewReader(bytes.NewReader(p))
	br.ReadSlice('\n')
	for i, e := range got {
		want, err := reply.Read(br, nil)
		if err != nil || !bytes.Equal(e, want) {
			t.Fatalf("element %d %q, want %q (%v)", i, e, want, err)
		}
	}
	if _, err := reply.Read(br, nil); err == nil {
		t.Fatal("fewer elements than the reply has")
	}
	for _, bad := range []string{"*99999999999\r\n", "*2\r\n:1\r\n", "*-1\r\n", ":1\r\n", "*x\r\n", "*1\r\n$5\r\nab\r\n"} {
		if _, ok := elements([]byte(bad)); ok {
			t.Fatalf("%q taken as a whole array", bad)
		}
	}
	mget := []byte("*100\r\n" + strings.Repeat("$5\r\nvalue\r\n$-1\r\n", 50))
	if n := testing.AllocsPerRun(100, func() { elements(mget) }); n > 2 {
		t.Fatalf("%v allocations for 100 elements", n)
	}
}
