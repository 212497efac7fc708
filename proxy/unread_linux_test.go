package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// waitRead waits until the server has read everything sent on conns: the
// kernel holds no unread byte on the server's side of any of them
// (rx_queue in /proc/net/tcp and tcp6).
func waitRead(t *testing.T, conns ...net.Conn) {
	t.Helper()
	waitUntil(t, "the server reads what was sent", func() bool {
		for _, c := range conns {
			server, client := c.RemoteAddr().(*net.TCPAddr), c.LocalAddr().(*net.TCPAddr)
			n, found := unread(t, server.Port, client.Port)
			if !found || n > 0 {
				return false
			}
		}
		return true
	})
}

// unread is the rx_queue of the loopback socket from local port to
// remote port, and whether there is one.
func unread(t *testing.T, local, remote int) (int, bool) {
	l, r := fmt.Sprintf(":%04X", local), fmt.Sprintf(":%04X", remote)
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue ...
			fields := strings.Fields(sc.Text())
			if len(fields) < 5 || !strings.HasSuffix(fields[1], l) || !strings.HasSuffix(fields[2], r) {
				continue
			}
			var tx, rx int
			if _, err := fmt.Sscanf(fields[4], "%x:%x", &tx, &rx); err != nil {
				t.Fatalf("%s: %q: %v", name, sc.Text(), err)
			}
			f.Close()
			return rx, true
		}
		f.Close()
	}
	return 0, false
}
