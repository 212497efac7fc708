package router

import "testing"

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
