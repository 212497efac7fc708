package proxy

import (
	"fmt"
	"testing"
)

// addReplies counts each error within a node's reply, and none of what a
// string holds, however it looks.
func TestAddReplies(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want string
	}{
		{"-ERR x\r\n", "map[ERR:1]"},
		{"!9\r\nBLOB err.\r\n", "map[BLOB:1]"},
		{"*3\r\n:-1\r\n*1\r\n-IN a\r\n%1\r\n+k\r\n!5\r\nMAP x\r\n", "map[IN:1 MAP:1]"},
		{"$10\r\n\r\n-FAKE x\r\n\r\n", "map[]"},
		{"*2\r\n=12\r\ntxt:\r\n!3 abc\r\n$-1\r\n", "map[]"},
		{">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n-ERR after a push\r\n", "map[ERR:1]"},
		{"*1\r\n$99\r\n\r\n-CUT short", "map[]"},
	} {
		var e errorStats
		e.addReplies([]byte(tc.raw))
		if got := fmt.Sprint(e.codes); got != tc.want {
			t.Errorf("%q: counted %s, want %s", tc.raw, got, tc.want)
		}
	}
}

// addReplies takes whatever bytes come without a panic, and each error it
// counts is in the total and, while codes are kept, under one code.
func FuzzAddReplies(f *testing.F) {
	for _, seed := range []string{"-ERR x\r\n", "*2\r\n$3\r\n\n-a\r\n!4\r\nE x\r\n", "*1\r\n$99\r\n\n-", "*1\r\n!-5\r\n\n!"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e errorStats
		e.addReplies(raw)
		var sum int64
		for _, n := range e.codes {
			sum += n
		}
		if len(e.codes) < maxErrorCodes && sum != e.total.Load() {
			t.Errorf("%q: codes sum to %d, total %d", raw, sum, e.total.Load())
		}
	})
}
