package router

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A node connection a loop keeps must not hold a big reply's read buffer
// once the reply is answered: it may stay idle for good (a KEYS * or a
// big MGET on the passthrough connection), and each loop keeps one per
// node.
func TestPipeLetsABigReplysBufferGo(t *testing.T) {
	const size = 8 << 20
	p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
	b := &fwdBatch{replies: make([][]byte, 1), idx: []int{0}}
	answeredLen := 0
	b.done = func([]int) { answeredLen, b.replies[0] = len(b.replies[0]), nil }
	p.send(&forwarded{cmd: []byte("*1\r\n$3\r\nGET\r\n"), replies: 1, batch: b})
	stream := "$" + strconv.Itoa(size) + "\r\n" + strings.Repeat("v", size) + "\r\n"

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for at := 0; at < len(stream); {
		n := min(len(stream)-at, 64<<10)
		if err := p.Feed(copy(p.ReadBuf(n), stream[at:at+n])); err != nil {
			t.Fatalf("Feed: %v", err)
		}
		at += n
	}
	if answeredLen == 0 || p.Waiting() {
		t.Fatalf("the reply was not answered (%d bytes)", answeredLen)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > size/4 {
		t.Errorf("heap in use grew by %d bytes after a %d-byte reply was answered", grew, size)
	}
	runtime.KeepAlive(p)
	runtime.KeepAlive(stream) // in use before, so in use after
}

// The same when the read that ends the big reply also brings the start of
// the next one (a busy pipelined connection): what is kept is sized for
// that start, not the big reply's buffer.
func TestPipeLetsABigReplysBufferGoMidNextReply(t *testing.T) {
	const size = 8 << 20
	p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
	var got []string
	p.send(answered("GET", 1, &got))
	p.send(answered("GET", 1, &got))
	stream := "$" + strconv.Itoa(size) + "\r\n" + strings.Repeat("v", size) + "\r\n$5\r\nhe"
	for at := 0; at < len(stream); {
		n := min(len(stream)-at, 64<<10)
		if err := p.Feed(copy(p.ReadBuf(n), stream[at:at+n])); err != nil {
			t.Fatalf("Feed: %v", err)
		}
		at += n
	}
	if len(got) != 1 {
		t.Fatalf("%d answers, want the big reply's", len(got))
	}
	if c := cap(p.in); c > 256<<10 {
		t.Errorf("the pipe keeps a read buffer of %d bytes for the next reply's %d", c, len(p.in))
	}
	if err := p.Feed(copy(p.ReadBuf(5), "llo\r\n")); err != nil || len(got) != 2 || got[1] != "$5\r\nhello\r\n" {
		t.Fatalf("the next reply: %q, %v", got[1:], err)
	}
}
