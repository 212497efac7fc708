package router

import (
	"strings"
	"testing"
)

// A reply cut across Feeds is kept whole in what Feed leaves of in,
// though Feed lets go of its reader at the end: small and big (over
// 64 KiB, whose buffer Feed drops once answered) replies, in 2 or 3
// pieces, one read ending exactly where a big reply does.
func TestPipeFeedKeepsAReplyCutAcrossReads(t *testing.T) {
	big := "$70000\r\n" + strings.Repeat("v", 70000) + "\r\n"
	replies := []string{"$5\r\nhello\r\n", big, "*2\r\n$1\r\na\r\n:7\r\n", big, big, "+OK\r\n"}
	stream := strings.Join(replies, "")
	at := func(i int) int { return len(strings.Join(replies[:i], "")) }
	cuts := []int{
		3,             // the first reply in 2 pieces
		at(1) + 10,    // the big one in 3 pieces
		at(1) + 40000, //
		at(2),         // a read ends where the big one does
		at(2) + 5,     // the array in 2 pieces
		at(3) + 1,     // then the next big one
		at(4) + 3,     // a big one's end and the next's start
		at(5) + 2,     //
		len(stream),
	}
	p := (&Cluster{}).NewPipe("127.0.0.1:1", false, false)
	var got []string
	for range replies {
		p.send(answered("*1\r\n$4\r\nPING\r\n", 1, &got))
	}
	from := 0
	for _, to := range cuts {
		if err := p.Feed(copy(p.ReadBuf(to-from), stream[from:to])); err != nil {
			t.Fatalf("Feed of bytes %d to %d: %v", from, to, err)
		}
		from = to
	}
	if len(got) != len(replies) {
		t.Fatalf("%d answers, want %d", len(got), len(replies))
	}
	for i := range replies {
		if got[i] != replies[i] {
			t.Errorf("answer %d is %.40q (%d bytes), want %.40q (%d bytes)", i, got[i], len(got[i]), replies[i], len(replies[i]))
		}
	}
	if p.Waiting() || len(p.in) != 0 {
		t.Errorf("after every reply: waiting %v, %d bytes left in", p.Waiting(), len(p.in))
	}
}
