package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// frames frames stream with f from its start, each call given all that
// is left (so that whole may take a command at once), and lists what
// every call returned, with the arguments of the commands found split.
func frames(f *framer, stream []byte, walkOnly bool) string {
	var b bytes.Buffer
	for pos := 0; pos < len(stream); {
		var argv [][]byte
		var n int
		var complete, split bool
		var err error
		if walkOnly {
			n, complete, err = f.walk(stream[pos:])
		} else {
			n, complete, split, err = f.nextArgs(stream[pos:], &argv)
		}
		if split {
			// What splitArgs makes of the same bytes, which a framer that
			// did not split them would leave to it.
			if want := splitArgs(nil, stream[pos:pos+n]); fmt.Sprintf("%q", argv) != fmt.Sprintf("%q", want) {
				return fmt.Sprintf("split %q, splitArgs %q", argv, want)
			}
		}
		fmt.Fprintf(&b, "%d %v %v;", pos+n, complete, err)
		pos += n
		if err != nil {
			break
		}
	}
	return b.String()
}

// The framer's whole-command path (whole) frames what it takes exactly as
// the byte-by-byte walk does, to the byte and the error, under every
// limit (a small one included, to be reached), for a client that has
// authenticated and one that has not; the arguments it splits are those
// splitArgs finds.
func FuzzFramerWhole(f *testing.F) {
	f.Add([]byte("*1\r\n$4\r\nPING\r\n*6\r\n$8\r\nTHROTTLE\r\n$3\r\nk:1\r\n$3\r\n100\r\n$2\r\n10\r\n$2\r\n1s\r\n$1\r\n1\r\n"), uint8(0), false)
	f.Add([]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*2\r\n$3\r\nGET\r\n$1\r\nk"), uint8(0), false)
	f.Add([]byte("*0\r\n*-1\r\n*-0\r\n*01\r\n$4\r\nPING\r\n*1\r\n$04\r\nPING\r\n"), uint8(0), false)
	f.Add([]byte("*1\r\n$4\rx\nPING\r\n*1\r\r\n$4\r\nPING\r\n*1\n$4\r\nPING\r\n"), uint8(0), false)
	f.Add([]byte("*1\r\n$4\r\nPINGxx*1\r\n$-1\r\n*1\r\n$0\r\n\r\n"), uint8(0), false)
	f.Add([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20000\r\n"), uint8(0), true)
	f.Add([]byte("*11\r\n"+strings.Repeat("$1\r\na\r\n", 11)), uint8(0), true)
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$16385\r\n"+strings.Repeat("x", 16385)+"\r\n"), uint8(0), true)
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$10\r\n0123456789\r\n"), uint8(12), false) // maxQuery 12
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$5\r\n01234\r\n"), uint8(13), false)       // maxBulk 4
	f.Add([]byte("*5\r\n"+strings.Repeat("$1\r\na\r\n", 5)), uint8(14), false)   // maxArgs 4
	f.Add([]byte("*1\r\n$000000000000000000000000000000004\r\nPING\r\n"), uint8(0), false)
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$9223372036854775807\r\n"), uint8(3), false)
	f.Fuzz(func(t *testing.T, stream []byte, limit uint8, unauth bool) {
		limits := func() *framer {
			fr := newTestFramer()
			if limit > 0 {
				// Small enough to be reached: the query buffer, an
				// argument's length and the count, in turn.
				switch limit % 3 {
				case 0:
					fr.maxQuery = int64(limit)
				case 1:
					fr.maxBulk = int64(limit / 3)
				case 2:
					fr.maxArgs = int64(limit / 3)
				}
			}
			fr.unauth = unauth
			return fr
		}
		whole, walked := frames(limits(), stream, false), frames(limits(), stream, true)
		if whole != walked {
			t.Fatalf("%q: with whole %s; walked %s", stream, whole, walked)
		}
	})
}

// A pipelined multibulk command is taken whole, with its arguments.
func TestFramerTakesAPipelineWhole(t *testing.T) {
	f := newTestFramer()
	var argv [][]byte
	cmd := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n")
	n, complete, split, err := f.nextArgs(append(cmd, cmd...), &argv)
	if n != len(cmd) || !complete || !split || err != nil || fmt.Sprintf("%q", argv) != `["SET" "k" "v1"]` {
		t.Fatalf("nextArgs: %d %v %v %v %q", n, complete, split, err, argv)
	}
	// Cut short: walked, and taken once the rest comes.
	argv = argv[:0]
	if n, complete, split, err = f.nextArgs(cmd[:10], &argv); n != 10 || complete || split || err != nil || len(argv) != 0 {
		t.Fatalf("a cut command: %d %v %v %v %q", n, complete, split, err, argv)
	}
	if n, complete, split, err = f.nextArgs(cmd[10:], &argv); n != len(cmd)-10 || !complete || split || err != nil {
		t.Fatalf("its rest: %d %v %v %v", n, complete, split, err)
	}
}
