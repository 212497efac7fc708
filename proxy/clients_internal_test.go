package proxy

import (
	"strings"
	"testing"
	"time"
)

// A client that has sent nothing is idle since it connected, as Redis
// says of one (idle=age): it said idle=0.
func TestClientLineIdleBeforeItsFirstCommand(t *testing.T) {
	created := time.Unix(1_000, 0)
	v := &clientView{id: 7, addr: "127.0.0.1:1", laddr: "127.0.0.1:2", created: created}
	v.multi = -1
	if line := v.line(created.Add(3 * time.Second)); !strings.Contains(line, " age=3 idle=3 ") {
		t.Errorf("before its first command: %q, want age=3 idle=3", line)
	}
	v.last.Store(created.Add(2 * time.Second).UnixNano())
	if line := v.line(created.Add(3 * time.Second)); !strings.Contains(line, " age=3 idle=1 ") {
		t.Errorf("after a command: %q, want age=3 idle=1", line)
	}
}
