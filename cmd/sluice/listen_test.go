package main

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// --listen with several addresses serves one sluice on each, as Redis's
// bind with several: a bucket taken through one is empty through the
// other. Protected mode looks at each, and one named twice is refused
// before anything is waited for.
func TestListenOnSeveralAddresses(t *testing.T) {
	p := start(t, binary(t), nil, "--listen", "127.0.0.1:0, [::1]:0")
	addrs := strings.Split(p.addr, ",")
	if len(addrs) != 2 || !strings.HasPrefix(addrs[0], "127.0.0.1:") || !strings.HasPrefix(addrs[1], "[::1]:") {
		t.Fatalf("served on %q, want 127.0.0.1 and [::1]", p.addr)
	}
	for i, want := range []string{"*5\r\n:0\r\n", "*5\r\n:1\r\n"} {
		conn, err := net.DialTimeout("tcp", addrs[i], 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "THROTTLE shared 1 1 1h\r\n"); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		if _, err := io.ReadFull(bufio.NewReader(conn), got); err != nil || string(got) != want {
			t.Errorf("THROTTLE through %s: %q, %v; want %q", addrs[i], got, err, want)
		}
		conn.Close()
	}
	stop(t, p)

	for _, c := range []struct{ listen, want string }{
		{"127.0.0.1:0,0.0.0.0:0", "--listen 0.0.0.0:0 is reachable from other hosts"},
		{"127.0.0.1:6380 127.0.0.1:6380", "--listen names 127.0.0.1:6380 twice"},
		{"127.0.0.1:0,6380", `--listen must be host:port (a port in 0-65535, 0 for any free one), not "6380"`},
	} {
		var out strings.Builder
		if code := run([]string{"--listen", c.listen}, noEnv, &out); code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("--listen %q: exit %d, %q; want 2 and %q", c.listen, code, out.String(), c.want)
		}
	}
}
