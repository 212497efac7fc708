package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"math/big"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/router/reply"
)

// strtolInt is glibc's (int)strtol(b, NULL, 10) worked out with big
// integers, apart from atoi's arithmetic: blanks and a sign, the longest
// run of digits, clamped to a long, then its low 32 bits.
func strtolInt(b []byte) int32 {
	s := strings.TrimLeft(string(b), " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	end := 0
	for end < len(s) && '0' <= s[end] && s[end] <= '9' {
		end++
	}
	v := new(big.Int)
	if end > 0 {
		v.SetString(s[:end], 10)
	}
	if neg {
		v.Neg(v)
	}
	if lo := big.NewInt(math.MinInt64); v.Cmp(lo) < 0 {
		v = lo
	}
	if hi := big.NewInt(math.MaxInt64); v.Cmp(hi) > 0 {
		v = hi
	}
	return int32(v.Int64())
}

func FuzzAtoi(f *testing.F) {
	for _, s := range []string{"1", "01", " 1", "1x", "+2", "-3", "", "-", " \t\v\f\r\n7", "4294967297",
		"99999999999999999999", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"-9223372036854775809", "2147483648", "-2147483649", "00000000000000000000000000012", "\x001"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := atoi(b), strtolInt(b); got != want {
			t.Fatalf("atoi(%q) = %d, strtol as an int %d", b, got, want)
		}
	})
}

// FuzzCountedKeys checks that the keys of a counted command are in its
// line, and are those Redis's genericGetKeys finds for the count C's atoi
// reads.
func FuzzCountedKeys(f *testing.F) {
	names := make([]string, 0, len(counted))
	for name := range counted {
		names = append(names, name)
	}
	sort.Strings(names)
	f.Add(uint8(0), "eval s 2 a b c")
	f.Add(uint8(1), "x 01 k1 k2")
	f.Add(uint8(2), "x 4294967297 a")
	f.Add(uint8(3), "x  -1 a")
	f.Add(uint8(4), "x d 1x k")
	f.Add(uint8(5), "x d 3 a b")
	f.Add(uint8(6), "x")
	f.Fuzz(func(t *testing.T, pick uint8, line string) {
		name := names[int(pick)%len(names)]
		var args [][]byte
		for _, a := range strings.Split(line, " ") {
			args = append(args, []byte(a))
		}
		c := counted[name]
		keys := countedKeys(name, args)
		var want []int
		if c.count < len(args) {
			if n := int(strtolInt(args[c.count])); n >= 1 && n <= len(args)-c.first {
				for k := c.first; k < c.first+n; k++ {
					want = append(want, k)
				}
				if c.store > 0 {
					want = append(want, c.store)
				}
			}
		}
		if !slices.Equal(keys, want) {
			t.Fatalf("%s %q: keys %v, want %v", name, args, keys, want)
		}
		for _, k := range keys {
			if k < 1 || k >= len(args) {
				t.Fatalf("%s %q: key %d out of the line", name, args, k)
			}
		}
	})
}

// hugeFramer is a framer under --proto-max-bulk-len and
// --client-query-buffer-limit within slack of a long's bound, which both
// take.
func hugeFramer(slack uint8) *framer {
	return &framer{maxBulk: math.MaxInt64 - int64(slack), maxArgs: defaultMaxArgs, maxQuery: math.MaxInt64 - int64(slack)}
}

// FuzzFramerHugeMax is FuzzFramer's comparisons under a hugeFramer: a bulk
// length near the bound must neither wrap in the framer nor past it, in
// redcon, and both paths must still read the same commands.
func FuzzFramerHugeMax(f *testing.F) {
	f.Add([]byte("*1\r\n$9223372036854775805\r\nabc"), uint8(3), uint8(0))
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$9223372036854775790\r\nab"), uint8(5), uint8(0))
	f.Add([]byte("*1\r\n$9223372036854775807\r\nx\r\n"), uint8(1), uint8(0))
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\r\n*1\r\n$9223372036854775000\r\n"), uint8(7), uint8(9))
	f.Fuzz(func(t *testing.T, stream []byte, cut, slack uint8) {
		step := int(cut%16) + 1
		sameInSteps(t, hugeFramer(slack), hugeFramer(slack), stream, step)
		loopCmds, loopReply := loopCommands(t, stream, hugeFramer(slack))
		goCmds, goReply := redconCommands(t, stream, step, *hugeFramer(slack))
		if strings.Join(loopCmds, " ") != strings.Join(goCmds, " ") || loopReply != goReply {
			t.Fatalf("a loop reads %q then answers %q; redcon through a framedConn, in reads of %d, reads %q then answers %q",
				loopCmds, loopReply, step, goCmds, goReply)
		}
	})
}

// A bulk length under a huge --proto-max-bulk-len that the body's count
// (n+2) takes without wrapping may still wrap redcon's own count of the
// command (where the length's line ends, plus n+2), which panicked the
// goroutine path (--io-loops -1, TLS) out of range, taking the process
// down. It is refused as an invalid bulk length, as a loop refuses it.
func TestBulkLengthNearMaxInt64Redcon(t *testing.T) {
	want := string(appendProtocolError(nil, errBulkLength.Error()))
	for _, stream := range []string{
		"PING\r\n*1\r\n$9223372036854775805\r\nabc",
		"*1\r\n$9223372036854775781\r\nabc",
		"*2\r\n$4\r\nECHO\r\n$9223372036854775790\r\nab",
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%q: redcon panicked: %v", stream, p)
				}
			}()
			_, reply := redconCommands(t, []byte(stream), len(stream), *hugeFramer(0))
			if reply != want {
				t.Errorf("%q: answered %q, want %q", stream, reply, want)
			}
			if _, reply := loopCommands(t, []byte(stream), hugeFramer(0)); reply != want {
				t.Errorf("%q: a loop answered %q, want %q", stream, reply, want)
			}
		}()
	}
}

// FuzzElements checks that elements, which slices a whole array reply with
// a reply.Scanner, gives exactly the elements reply.Read reads one by one
// after the array's header, and refuses any other reply. The input is
// tried as one reply, and its leading replies as the elements of an array,
// so that most inputs make an array Read accepts.
func FuzzElements(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		checkElements(t, in)
		br := bufio.NewReader(bytes.NewReader(in))
		var body []byte
		n := 0
		for ; n < 1000; n++ {
			at := len(body)
			var err error
			if body, err = reply.Read(br, body); err != nil {
				break
			}
			if len(body) == at {
				t.Fatalf("reply.Read read nothing from %q", in)
			}
		}
		checkElements(t, append(appendArrayHeader(nil, n), body...))
	})
}

// checkElements checks elements on the reply p starts with, if reply.Read
// accepts it.
func checkElements(t *testing.T, p []byte) {
	whole, err := reply.Read(bufio.NewReader(bytes.NewReader(p)), nil)
	if err != nil {
		return
	}
	p = whole
	got, ok := elements(p)
	br := bufio.NewReader(bytes.NewReader(p))
	head, _ := br.ReadSlice('\n')
	if p[0] != '*' || string(head) == "*-1\r\n" {
		if ok {
			t.Fatalf("%q, not an array, taken as one: %q", p, got)
		}
		return
	}
	if !ok {
		t.Fatalf("array %q refused", p)
	}
	for i, e := range got {
		want, err := reply.Read(br, nil)
		if err != nil || !bytes.Equal(e, want) {
			t.Fatalf("%q: element %d %q, want %q (%v)", p, i, e, want, err)
		}
		// Callers append to an element; that must not write over the next.
		if cap(e) != len(e) {
			t.Fatalf("%q: element %d %q has room for %d more bytes", p, i, e, cap(e)-len(e))
		}
	}
	if extra, err := reply.Read(br, nil); !errors.Is(err, io.EOF) {
		t.Fatalf("%q: %d elements, and %q after them (%v)", p, len(got), extra, err)
	}
	if _, ok := elements(p[:len(p)-1]); ok {
		t.Fatalf("%q less its last byte taken as a whole array", p)
	}
}
