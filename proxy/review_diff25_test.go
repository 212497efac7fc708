package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A followed split denies a call, then its marker is rewritten through
// passthrough with its name and more tags: once read again, its new
// sub-buckets have tokens, and a call is decided by them, not denied by
// the denial of the split read before, which was kept by the split's name
// alone: the call was denied here, told to retry when the forged marker
// lapses, in 2286.
func TestReviewRenamedTagsForgetTheDenial(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r}))
	key := "{review-diff25}denied"
	until := time.Now().Add(900 * time.Millisecond).UnixMilli()
	if got := conn.do("SET", router.KeyPrefix+key, fmt.Sprintf("~0:%d:0:g:a", until)); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	for i := range 6 {
		if got := conn.do("THROTTLE", key, "6", "1", "1d"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
			t.Fatalf("THROTTLE %d: %q", i, got)
		}
	}
	if got := conn.do("THROTTLE", key, "6", "1", "1d"); !strings.HasPrefix(got, "*5\r\n:1\r\n") {
		t.Fatalf("THROTTLE of an empty bucket: %q", got)
	}
	if got := conn.do("SET", router.KeyPrefix+key, "~0:9999999999999:0:g:a,b,c"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	waitUntil(t, "the marker is read again", func() bool { return subBuckets(r, key) == 3 })
	if got := conn.do("THROTTLE", key, "6", "1", "1d"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
		t.Errorf("THROTTLE with sub-buckets b and c untouched: %q, want allowed", got)
	}
	if got := conn.do("EXISTS", "sluice{b}g:"+key, "sluice{c}g:"+key); got != ":1\r\n" {
		t.Errorf("EXISTS of the new sub-buckets: %q, want one taken from", got)
	}
}
