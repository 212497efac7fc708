package router

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
)

// TestRedirectAddr reads the node of MOVED and ASK as Redis 7 writes it:
// "%s:%d" of the node's IP, which for IPv6 has no brackets.
func TestRedirectAddr(t *testing.T) {
	for _, tc := range []struct {
		reply string
		from  string // the node that sent it
		addr  string
		ok    bool
	}{
		{"-MOVED 3999 127.0.0.1:6381\r\n", "10.0.0.9:7000", "127.0.0.1:6381", true},
		{"-ASK 3999 10.0.0.2:7000\r\n", "10.0.0.9:7000", "10.0.0.2:7000", true},
		{"-MOVED 3999 redis-1.example:7000\r\n", "10.0.0.9:7000", "redis-1.example:7000", true},
		// The slot map's addresses are net.JoinHostPort's: the redirect's
		// must be too, or the node gets a second set of connections.
		{"-MOVED 3999 ::1:7000\r\n", "10.0.0.9:7000", "[::1]:7000", true},
		{"-ASK 12 fe80::1:2:6379\r\n", "10.0.0.9:7000", "[fe80::1:2]:6379", true},
		{"-MOVED 3999 [::1]:7000\r\n", "10.0.0.9:7000", "[::1]:7000", true},
		// A redirect without a host (cluster-preferred-endpoint-type
		// unknown-endpoint) is to the host of the node that sent it.
		{"-MOVED 3999 :7001\r\n", "10.0.0.9:7000", "10.0.0.9:7001", true},
		{"-ASK 3999 :7001\r\n", "[::1]:7000", "[::1]:7001", true},
		{"-MOVED 3999 :7001\r\n", "redis.example:7000", "redis.example:7001", true},
		{"-MOVED 3999 :7001\r\n", "", "", false},
		{"-MOVED 3999\r\n", "10.0.0.9:7000", "", false},
		{"-MOVED 3999 127.0.0.1\r\n", "10.0.0.9:7000", "", false},
		{"-MOVED 3999 127.0.0.1:\r\n", "10.0.0.9:7000", "", false},
		{"-MOVED 3999 127.0.0.1:x\r\n", "10.0.0.9:7000", "", false},
		{"-MOVED 3999 127.0.0.1:6381", "10.0.0.9:7000", "", false},
	} {
		addr, ok := redirectAddr([]byte(tc.reply), tc.from)
		if addr != tc.addr || ok != tc.ok {
			t.Errorf("%q from %q: %q, %v; want %q, %v", tc.reply, tc.from, addr, ok, tc.addr, tc.ok)
		}
	}
}

// A script a client EVALs at every call is stored once: each call after
// the first costs a lookup, no SHA1, no write and no allocation.
func BenchmarkRememberScriptKnown(b *testing.B) {
	c := NewCluster(ClusterConfig{Seeds: []string{"127.0.0.1:1"}})
	defer c.Close()
	body := []byte(strings.Repeat("local v = redis.call('GET', KEYS[1]) ", 16))
	c.rememberRan(body, 0)
	b.ReportAllocs()
	for b.Loop() {
		c.rememberRan(body, 0)
	}
}

// An EVALSHA's script is found by its SHA1, whichever case the EVALSHA
// wrote it in, and the command replayed as the EVAL of its text.
func TestEvalshaReplayedAsEval(t *testing.T) {
	body := "return 1"
	sum := sha1.Sum([]byte(body))
	sha := hex.EncodeToString(sum[:])
	for _, tc := range []struct{ evalsha, eval string }{
		{"$7\r\nEVALSHA\r\n", "$4\r\nEVAL\r\n"},
		{"$10\r\nevalsha_ro\r\n", "$7\r\nEVAL_RO\r\n"},
	} {
		cmd := []byte("*3\r\n" + tc.evalsha + "$40\r\n" + strings.ToUpper(sha) + "\r\n$1\r\n0\r\n")
		got, ok := evalshaSHA(cmd)
		if !ok || got != sha {
			t.Fatalf("evalshaSHA(%q): %q, %v; want %q", cmd, got, ok, sha)
		}
		if got, want := string(evalWith(cmd, body)), "*3\r\n"+tc.eval+"$8\r\nreturn 1\r\n$1\r\n0\r\n"; got != want {
			t.Errorf("evalWith(%q): %q, want %q", cmd, got, want)
		}
	}
	if _, ok := evalshaSHA([]byte("*3\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n0\r\n")); ok {
		t.Error("evalshaSHA read an EVAL")
	}
}
