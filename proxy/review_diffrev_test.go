package proxy

import (
	"bytes"
	"testing"
)

// A split write one part of which may have run (its connection broke, or
// its node held it past the timeout: ERR) is not answered a code cluster
// clients retry the whole command on, whatever another part answered: a
// retried DEL or MSET would run that part twice, as when another part
// answered a value. (Only a part that answered a value counted as run.)
func TestSplitWriteThatMayHaveRunIsNotRetried(t *testing.T) {
	mayHaveRun := []byte("-ERR sluice: connection to 127.0.0.1:2 failed: no reply within the timeout\r\n")
	for _, retry := range []string{
		"-CLUSTERDOWN sluice: connection to 127.0.0.1:1 failed: dial tcp 127.0.0.1:1: connect: connection refused\r\n",
		"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
	} {
		for _, how := range []merge{mergeSum, mergeOK} {
			it := fwdItem{how: how, write: true}
			got := it.merged([][]byte{[]byte(retry), mayHaveRun})
			if !bytes.HasPrefix(got, []byte("-ERR ")) {
				t.Errorf("merge %d of %q and %q: %q, want ERR", how, retry, mayHaveRun, got)
			}
		}
	}
}
