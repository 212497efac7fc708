package router

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/sluice-rl/sluice/router/reply"
)

// Any bytes a node may send, fed to a pipe in reads of any size: each
// reply reply.Read takes from the whole stream answers the next command,
// whole and in order, and a stream reply.Read reads to its end without an
// error never makes Feed fail. Feed takes a reply once Scanner.Whole says
// it is all there; where the two disagree, a reply would wait in the
// pipe for bytes that never come (a stalled connection) or be cut.
func FuzzPipeFeedBytes(f *testing.F) {
	for _, r := range pipeReplies {
		f.Add([]byte(r+r), []byte{3})
	}
	f.Add([]byte("+OK\r\n$-1\r\n*2\r\n:1\r\n"), []byte{1})
	f.Add([]byte("*1\r\n$3\r\nab\r\n"), []byte{0})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		if len(stream) > 1<<12 {
			stream = stream[:1<<12]
		}
		var want []string
		var readErr error
		br := bufio.NewReader(bytes.NewReader(stream))
		for {
			r, err := reply.Read(br, nil)
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF {
					readErr = err
				}
				break
			}
			want = append(want, string(r))
		}
		p := (&Cluster{}).NewPipe("127.0.0.1:1", true, false)
		var got []string
		for range len(want) + 1 {
			fw := answered("*1\r\n$4\r\nPING\r\n", 1, &got)
			fw.redirects = maxRedirects // a MOVED in the stream is an answer here
			p.send(fw)
		}
		var feedErr error
		for i := 0; len(stream) > 0 && feedErr == nil; i++ {
			n := len(stream)
			if len(cuts) > 0 {
				n = min(n, 1+int(cuts[i%len(cuts)]))
			}
			feedErr = p.Feed(copy(p.ReadBuf(n), stream[:n]))
			stream = stream[n:]
		}
		if len(got) > len(want) {
			t.Fatalf("%d answers, reply.Read takes %d replies: %q", len(got), len(want), got)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("answer %d is %q, want %q", i, got[i], want[i])
			}
		}
		if feedErr == nil && len(got) != len(want) {
			t.Fatalf("%d answers and no error, reply.Read takes %d replies (then %v)", len(got), len(want), readErr)
		}
		if readErr == nil && feedErr != nil {
			t.Fatalf("Feed: %v, where reply.Read takes the whole stream", feedErr)
		}
	})
}
