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
		addr  string
		ok    bool
	}{
		{"-MOVED 3999 127.0.0.1:6381\r\n", "127.0.0.1:6381", true},
		{"-ASK 3999 10.0.0.2:7000\r\n", "10.0.0.2:7000", true},
		{"-MOVED 3999 redis-1.example:7000\r\n", "redis-1.example:7000", true},
		// The slot map's addresses are net.JoinHostPort's: the redirect's
		// must be too, or the node gets a second set of connections.
		{"-MOVED 3999 ::1:7000\r\n", "[::1]:7000", true},
		{"-ASK 12 fe80::1:2:6379\r\n", "[fe80::1:2]:6379", true},
		{"-MOVED 3999 [::1]:7000\r\n", "[::1]:7000", true},
		{"-MOVED 3999\r\n", "", false},
		{"-MOVED 3999 127.0.0.1\r\n", "", false},
		{"-MOVED 3999 127.0.0.1:\r\n", "", false},
		{"-MOVED 3999 127.0.0.1:x\r\n", "", false},
		{"-MOVED 3999 127.0.0.1:6381", "", false},
	} {
		addr, ok := redirectAddr([]byte(tc.reply))
		if addr != tc.addr || ok != tc.ok {
			t.Errorf("%q: %q, %v; want %q, %v", tc.reply, addr, ok, tc.addr, tc.ok)
		}
	}
}

// A script a client EVALs at every call is remembered once: each call
// after the first costs a lookup, no SHA1 and no allocation.
func BenchmarkRememberScriptKnown(b *testing.B) {
	c := NewCluster(ClusterConfig{Seeds: []string{"127.0.0.1:1"}})
	defer c.Close()
	body := []byte(strings.Repeat("local v = redis.call('GET', KEYS[1]) ", 16))
	c.RememberScript(body)
	b.ReportAllocs()
	for b.Loop() {
		c.RememberScript(body)
	}
}

// A remembered script is found by its SHA1, whichever case the EVALSHA
// wrote it in, and forgotten by ForgetScripts.
func TestRememberedScriptReplays(t *testing.T) {
	c := NewCluster(ClusterConfig{Seeds: []string{"127.0.0.1:1"}})
	defer c.Close()
	body := "return 1"
	c.RememberScript([]byte(body))
	c.RememberScript([]byte(body)) // known: the fast path
	sum := sha1.Sum([]byte(body))
	sha := strings.ToUpper(hex.EncodeToString(sum[:]))
	cmd := []byte("*3\r\n$7\r\nEVALSHA\r\n$40\r\n" + sha + "\r\n$1\r\n0\r\n")
	got, ok := c.evalFor(cmd)
	if want := "*3\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n0\r\n"; !ok || string(got) != want {
		t.Fatalf("evalFor: %q, %v; want %q", got, ok, want)
	}
	c.ForgetScripts()
	if got, ok := c.evalFor(cmd); ok {
		t.Fatalf("evalFor after ForgetScripts: %q, want nothing", got)
	}
	c.RememberScript([]byte(body))
	if _, ok := c.evalFor(cmd); !ok {
		t.Fatal("a script remembered again after ForgetScripts is not found")
	}
}
