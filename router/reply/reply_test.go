package reply

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

var valid = []struct{ name, in string }{
	{"simple string", "+OK\r\n"},
	{"empty simple string", "+\r\n"},
	{"simple string with lone CR", "+a\rb\r\n"},
	{"error", "-ERR unknown command 'foo'\r\n"},
	{"integer", ":1000\r\n"},
	{"negative integer", ":-42\r\n"},
	{"plus integer", ":+7\r\n"},
	{"min integer", ":-9223372036854775808\r\n"},
	{"max integer", ":9223372036854775807\r\n"},
	{"bulk", "$5\r\nhello\r\n"},
	{"empty bulk", "$0\r\n\r\n"},
	{"binary bulk", "$4\r\n\r\n\x00\n\r\n"},
	{"null bulk", "$-1\r\n"},
	{"array", "*2\r\n$3\r\nfoo\r\n:1\r\n"},
	{"empty array", "*0\r\n"},
	{"null array", "*-1\r\n"},
	{"nested array", "*4\r\n*2\r\n:1\r\n*0\r\n$-1\r\n*1\r\n*1\r\n+x\r\n+y\r\n"},
	{"array ending in nested", "*2\r\n:1\r\n*2\r\n:2\r\n*1\r\n:3\r\n"},
	{"null", "_\r\n"},
	{"double", ",3.14\r\n"},
	{"double exponent", ",-1.5e+20\r\n"},
	{"double integral", ",10\r\n"},
	{"double inf", ",inf\r\n"},
	{"double -inf", ",-inf\r\n"},
	{"double nan", ",nan\r\n"},
	// Redis 7.0 prints doubles with "%.17g", which spells a NaN whose sign
	// bit is set (Lua's 0/0) "-nan".
	{"double -nan", ",-nan\r\n"},
	{"true", "#t\r\n"},
	{"false", "#f\r\n"},
	{"blob error", "!21\r\nSYNTAX invalid syntax\r\n"},
	{"verbatim", "=15\r\ntxt:Some string\r\n"},
	{"verbatim empty text", "=4\r\nmkd:\r\n"},
	{"big number", "(3492890328409238509324850943850943825024385\r\n"},
	{"negative big number", "(-1\r\n"},
	// Redis 7.0 passes a Lua script's {big_number=...} on unchecked.
	{"big number of any text", "(x1\r\n"},
	{"empty big number", "(\r\n"},
	{"map", "%2\r\n+first\r\n:1\r\n+second\r\n*2\r\n:2\r\n:3\r\n"},
	{"empty map", "%0\r\n"},
	{"set", "~3\r\n+a\r\n+b\r\n_\r\n"},
	{"empty set", "~0\r\n"},
	{"push", ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"},
	{"attribute and reply", "|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n"},
	{"empty attribute", "|0\r\n:1\r\n"},
	{"attribute on attribute", "|1\r\n+a\r\n+b\r\n|1\r\n+c\r\n+d\r\n+reply\r\n"},
	{"attribute on element", "*2\r\n:1\r\n|1\r\n+ttl\r\n:3600\r\n:2\r\n"},
	{"attribute on aggregate element", "*2\r\n|1\r\n+a\r\n+b\r\n*1\r\n:1\r\n:2\r\n"},
}

func TestReadValid(t *testing.T) {
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			// The reply is followed by another, which must be left for
			// the next call, and by the end of the stream.
			r := bufio.NewReader(strings.NewReader(tt.in + "+next\r\n"))
			got, err := Read(r, []byte("kept"))
			if err != nil || string(got) != "kept"+tt.in {
				t.Fatalf("got %q, %v, want %q", got, err, "kept"+tt.in)
			}
			if got, err := Read(r, got[:0]); err != nil || string(got) != "+next\r\n" {
				t.Fatalf("second reply: got %q, %v, want %q", got, err, "+next\r\n")
			}
			if got, err := Read(r, nil); err != io.EOF || len(got) != 0 {
				t.Fatalf("at the end: got %q, %v, want io.EOF", got, err)
			}
		})
	}
}

// TestReadOneByteAtATime makes every line and body cross a read, and every
// line overflow bufio's smallest buffer.
func TestReadOneByteAtATime(t *testing.T) {
	var all strings.Builder
	for _, tt := range valid {
		all.WriteString(tt.in)
	}
	long := "+" + strings.Repeat("x", 100) + "\r\n"
	bulk := fmt.Sprintf("$%d\r\n%s\r\n", 3*chunk+5, strings.Repeat("y", 3*chunk+5))
	all.WriteString(long + bulk)

	r := bufio.NewReaderSize(iotest.OneByteReader(strings.NewReader(all.String())), 16)
	for _, tt := range append(valid, struct{ name, in string }{"long line", long}, struct{ name, in string }{"big bulk", bulk}) {
		got, err := Read(r, nil)
		if err != nil || string(got) != tt.in {
			t.Fatalf("%s: got %.80q, %v, want %.80q", tt.name, got, err, tt.in)
		}
	}
	if _, err := Read(r, nil); err != io.EOF {
		t.Fatalf("at the end: got %v, want io.EOF", err)
	}
}

func TestReadInvalid(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     error
	}{
		{"empty input", "", io.EOF},
		{"unknown type", "?x\r\n", ErrProtocol},
		{"RESP3 chunk type", ";4\r\nabcd\r\n", ErrProtocol},
		{"inline command", "PING\r\n", ErrProtocol},
		{"empty line", "\r\n", ErrProtocol},
		{"bare LF", "\n", ErrProtocol},
		{"missing CR", "+OK\n", ErrProtocol},
		{"CR not before LF", "+OK\r \n", ErrProtocol},
		{"bad integer", ":12a\r\n", ErrProtocol},
		{"empty integer", ":\r\n", ErrProtocol},
		{"sign only integer", ":-\r\n", ErrProtocol},
		{"integer overflow", ":9223372036854775808\r\n", ErrProtocol},
		{"integer underflow", ":-9223372036854775809\r\n", ErrProtocol},
		{"bad length", "$abc\r\nabc\r\n", ErrProtocol},
		{"empty length", "$\r\n\r\n", ErrProtocol},
		{"negative length", "$-2\r\n", ErrProtocol},
		{"plus length", "$+1\r\nx\r\n", ErrProtocol},
		{"huge length", "*99999999999999999999\r\n", ErrProtocol},
		// 2^62 pairs would be 2^63 elements, past int64.
		{"huge map", "%4611686018427387904\r\n", ErrProtocol},
		{"huge attribute", "|4611686018427387904\r\n", ErrProtocol},
		{"largest map", "%4611686018427387903\r\n", io.ErrUnexpectedEOF},
		{"largest attribute", "|4611686018427387903\r\n", io.ErrUnexpectedEOF},
		{"null map", "%-1\r\n", ErrProtocol},
		{"null blob error", "!-1\r\n", ErrProtocol},
		{"streamed bulk", "$?\r\n;4\r\nHell\r\n;0\r\n", ErrProtocol},
		{"streamed array", "*?\r\n:1\r\n.\r\n", ErrProtocol},
		{"bulk too long", "$3\r\nhello\r\n", ErrProtocol},
		{"bulk without CRLF", "$5\r\nhello!!", ErrProtocol},
		{"bad nested element", "*2\r\n:1\r\n:x\r\n", ErrProtocol},
		{"bad boolean", "#x\r\n", ErrProtocol},
		{"long boolean", "#tt\r\n", ErrProtocol},
		{"null with text", "_x\r\n", ErrProtocol},
		{"bad double", ",1.\r\n", ErrProtocol},
		{"double without digits", ",.5\r\n", ErrProtocol},
		{"double bad exponent", ",1e\r\n", ErrProtocol},
		{"verbatim without format", "=3\r\nabc\r\n", ErrProtocol},
		{"verbatim without colon", "=5\r\ntxt-x\r\n", ErrProtocol},
		{"truncated line", "+OK", io.ErrUnexpectedEOF},
		{"truncated CRLF", "+OK\r", io.ErrUnexpectedEOF},
		{"truncated bulk", "$5\r\nhel", io.ErrUnexpectedEOF},
		{"bulk without its CRLF", "$5\r\nhello", io.ErrUnexpectedEOF},
		{"truncated array", "*2\r\n:1\r\n", io.ErrUnexpectedEOF},
		{"truncated map", "%1\r\n+k\r\n", io.ErrUnexpectedEOF},
		{"attribute without reply", "|1\r\n+k\r\n+v\r\n", io.ErrUnexpectedEOF},
		{"huge bulk, few bytes", "$999999999999\r\nabc", io.ErrUnexpectedEOF},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(bufio.NewReader(strings.NewReader(tt.in)), []byte("kept"))
			if !errors.Is(err, tt.want) {
				t.Fatalf("got error %v, want %v", err, tt.want)
			}
			if string(got) != "kept" {
				t.Fatalf("got %q, want dst as passed", got)
			}
		})
	}
}

func TestReadPassesReaderErrors(t *testing.T) {
	boom := errors.New("connection reset")
	for _, in := range []string{"", "*2\r\n:1\r\n", "$5\r\nhe", "+O"} {
		r := bufio.NewReader(io.MultiReader(strings.NewReader(in), iotest.ErrReader(boom)))
		if _, err := Read(r, nil); err != boom {
			t.Errorf("after %q: got %v, want %v", in, err, boom)
		}
	}
}

func TestReadDepth(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("*1\r\n", n) + ":1\r\n" }
	if got, err := Read(bufio.NewReader(strings.NewReader(deep(maxDepth))), nil); err != nil || string(got) != deep(maxDepth) {
		t.Errorf("%d levels: got %v, want the reply", maxDepth, err)
	}
	if _, err := Read(bufio.NewReader(strings.NewReader(deep(maxDepth+1))), nil); !errors.Is(err, ErrProtocol) {
		t.Errorf("%d levels: got %v, want ErrProtocol", maxDepth+1, err)
	}
	attrs := strings.Repeat("|0\r\n", maxDepth+1) + ":1\r\n"
	if _, err := Read(bufio.NewReader(strings.NewReader(attrs)), nil); !errors.Is(err, ErrProtocol) {
		t.Errorf("%d attributes: got %v, want ErrProtocol", maxDepth+1, err)
	}
}

// TestReadAllocatesAsBytesArrive checks that declared lengths a server
// never follows up on cost no memory.
func TestReadAllocatesAsBytesArrive(t *testing.T) {
	for _, in := range []string{
		"$999999999999\r\n" + strings.Repeat("x", 100<<10),
		"*999999999999\r\n" + strings.Repeat(":1\r\n", 1000),
		"%999999999999\r\n" + strings.Repeat("$999999999999\r\nx", 1),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Read(bufio.NewReader(strings.NewReader(in)), nil)
		runtime.ReadMemStats(&after)
		if err != io.ErrUnexpectedEOF {
			t.Errorf("%.20q: got %v, want io.ErrUnexpectedEOF", in, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 4*uint64(len(in))+1<<20 {
			t.Errorf("%.20q: allocated %d bytes for %d of input", in, n, len(in))
		}
	}
}

// A big bulk that does arrive costs about twice its size (doubled as it
// arrives), not the five times that a chunk at a time (append's 1.25x
// growth) allocated on its way.
func TestReadBigBulkAllocatesAboutTwiceItsSize(t *testing.T) {
	const size = 8 << 20
	in := "$" + strconv.Itoa(size) + "\r\n" + strings.Repeat("x", size) + "\r\n"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := Read(bufio.NewReaderSize(strings.NewReader(in), 64<<10), nil)
	runtime.ReadMemStats(&after)
	if err != nil || len(r) != len(in) {
		t.Fatalf("read %d bytes, %v", len(r), err)
	}
	// Measured: 2.3 times the size (3.2 under -race), where it was 5.3.
	if n := after.TotalAlloc - before.TotalAlloc; n > 4*size {
		t.Fatalf("allocated %d bytes for a bulk of %d", n, size)
	}
}

func ExampleRead() {
	// A RESP3 server's reply to GET, then a pushed invalidation message.
	conn := strings.NewReader("$5\r\nhello\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nkey\r\n")
	r := bufio.NewReader(conn)
	var buf []byte
	for {
		var err error
		if buf, err = Read(r, buf[:0]); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("forward %q\n", buf)
	}
	// Output:
	// forward "$5\r\nhello\r\n"
	// forward ">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nkey\r\n"
	// EOF
}

func FuzzRead(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Read(bufio.NewReader(bytes.NewReader(in)), nil)
		// The smallest buffer, filled a byte at a time, splits lines and
		// bodies everywhere; that must change nothing.
		small, serr := Read(bufio.NewReaderSize(iotest.OneByteReader(bytes.NewReader(in)), 16), []byte("kept"))
		if fmt.Sprint(err) != fmt.Sprint(serr) || string(small) != "kept"+string(got) {
			t.Fatalf("small buffer: got %q, %v, want %q, %v", small, serr, "kept"+string(got), err)
		}
		if err != nil {
			if !errors.Is(err, ErrProtocol) && err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("unexpected error %v", err)
			}
			if len(got) != 0 {
				t.Fatalf("got %q with error %v", got, err)
			}
			return
		}
		if !bytes.HasPrefix(in, got) {
			t.Fatalf("got %q, not a prefix of the input", got)
		}
		r := bufio.NewReader(bytes.NewReader(got))
		if again, err := Read(r, nil); err != nil || !bytes.Equal(again, got) {
			t.Fatalf("reading %q alone: got %q, %v", got, again, err)
		}
		if _, err := Read(r, nil); err != io.EOF {
			t.Fatalf("after %q alone: got %v, want io.EOF", got, err)
		}
	})
}

// repeat reads b over and over, so a benchmark never runs out of replies.
type repeat struct {
	b []byte
	i int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.b[r.i:])
		n += c
		r.i = (r.i + c) % len(r.b)
	}
	return n, nil
}

func BenchmarkRead(b *testing.B) {
	for _, bb := range []struct{ name, in string }{
		{"bulk", "$5\r\nhello\r\n"},
		{"array10", "*10\r\n" + strings.Repeat("$5\r\nhello\r\n", 10)},
	} {
		b.Run(bb.name, func(b *testing.B) {
			r := bufio.NewReader(&repeat{b: []byte(bb.in)})
			dst := make([]byte, 0, 512)
			b.SetBytes(int64(len(bb.in)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = Read(r, dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The Scanner says a reply is whole exactly when its last byte is in,
// fed a byte at a time, and starts over for the next one.
func TestScannerFindsEachReply(t *testing.T) {
	var s Scanner
	for _, tt := range valid {
		in := tt.in + "+next\r\n"
		for k := 1; k <= len(in); k++ {
			n := s.Whole([]byte(in[:k]))
			switch {
			case k < len(tt.in) && n != 0:
				t.Fatalf("%s: whole at %d of %d bytes: %d", tt.name, k, len(tt.in), n)
			case k == len(tt.in) && n != len(tt.in):
				t.Fatalf("%s: %d with all %d bytes in", tt.name, n, len(tt.in))
			case n > 0:
				k = len(in) // done
			}
		}
		if n := s.Whole([]byte("+next\r\n")); n != len("+next\r\n") {
			t.Fatalf("%s: the next reply: %d", tt.name, n)
		}
	}
}

// Short says how much of a string is still to come, the bytes of its
// end included, inside an aggregate too; 0 once the reply is whole and
// while no string's length is read.
func TestScannerShort(t *testing.T) {
	for _, tt := range []struct {
		in    string
		short int
	}{
		{"$5\r\nab", 5},
		{"$5\r\n", 7},
		{"$5\r\nabcde\r", 1},
		{"$5", 0},
		{"*2\r\n$1\r\na\r\n$10\r\n0123", 8},
		{"*2\r\n$1\r\na\r\n", 0},
		{"$0\r\n\r\n", 0},
	} {
		var s Scanner
		if n := s.Whole([]byte(tt.in)); s.Short() != tt.short {
			t.Errorf("%q: Short %d (Whole %d), want %d", tt.in, s.Short(), n, tt.short)
		}
	}
}

// FuzzScanner: fed what Read reads a byte at a time, the Scanner finds the
// reply's end where Read does, never claims a reply Read finds unfinished,
// never says it needs more than the rest of a reply Read takes (Short),
// and says a reply Read refuses is whole, for Read to refuse, by the time
// all of it is in, and refused (Refused) where Read refuses it: a pipe
// passes the bytes of a reply not refused on without Read.
func FuzzScanner(f *testing.F) {
	for _, tt := range valid {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte("*2\r\n:abc\r\n:1\r\n"))
	f.Add([]byte("*3\r\n$2\r\nab\r\n*1\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Read(bufio.NewReader(bytes.NewReader(in)), nil)
		var s Scanner
		n, at := 0, 0
		for k := 1; k <= len(in) && n == 0; k++ {
			n, at = s.Whole(in[:k]), k
			if n == 0 && err == nil && k+s.Short() > len(got) {
				t.Fatalf("at %d of a reply of %d bytes, %d more said needed", k, len(got), s.Short())
			}
		}
		switch {
		case err == nil && (n != len(got) || at != len(got)):
			t.Fatalf("whole at %d of %d bytes with %d; Read took %d", at, len(in), n, len(got))
		case err == nil && s.Refused():
			t.Fatalf("a reply Read takes (%q) said refused", got)
		case errors.Is(err, ErrProtocol) && n == 0:
			t.Fatalf("a reply Read refuses (%v) never whole", err)
		case errors.Is(err, ErrProtocol) && !s.Refused():
			// A pipe would pass it on as a reply (Pipe.Feed).
			t.Fatalf("a reply Read refuses (%v) not said refused", err)
		case (err == io.EOF || err == io.ErrUnexpectedEOF) && n != 0:
			t.Fatalf("whole at %d with %d; Read: %v", at, n, err)
		}
	})
}
