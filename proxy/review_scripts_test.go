package proxy_test

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A script run by EVAL that raises an error (a redis.call that fails,
// error()) compiled and ran: the node cached it, and an EVALSHA of it
// runs on a single Redis. Through sluice, on a key of another primary,
// it answered NOSCRIPT: only an EVAL that answered no error was
// remembered for replay.
func TestReviewScriptsEvalshaOfAScriptThatRaised(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		io := strconv.Itoa(-cfg.Loops)
		a := keyWhere(t, c, "rsa"+io, "h", func(n *clustertest.Node, _ string) bool { return n == c.Nodes[0] })
		b := keyWhere(t, c, "rsb"+io, "n", func(n *clustertest.Node, _ string) bool { return n == c.Nodes[1] })
		if got := conn.do("HSET", a, "f", "v"); got != ":1\r\n" {
			t.Fatalf("HSET: %q", got)
		}
		for i, body := range []string{
			"return redis.call('INCR', KEYS[1]) -- " + io,
			"if redis.call('TYPE', KEYS[1]).ok == 'hash' then error('a hash') end return redis.call('INCR', KEYS[1]) -- " + io,
		} {
			sum := sha1.Sum([]byte(body))
			sha := hex.EncodeToString(sum[:])
			if got := conn.do("EVAL", body, "1", a); got[0] != '-' {
				t.Fatalf("EVAL %d on a hash: %q, want its error", i, got)
			}
			if got, want := conn.do("EVALSHA", sha, "1", b), ":"+strconv.Itoa(i+1)+"\r\n"; got != want {
				t.Errorf("EVALSHA %d on another primary of a script whose EVAL raised: %q, want %q", i, got, want)
			}
		}
	})
}
