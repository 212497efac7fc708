package proxy_test

import (
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
	for _, s := range tcpSockets(t, true) {
		if s.local == local && s.remote == remote {
			return s.rx, true
		}
	}
	return 0, false
}

// tcpSocket is a row of /proc/net/tcp: ports, state (hex: 01 established,
// 06 TIME_WAIT, 08 the peer ended its side) and the bytes queued.
type tcpSocket struct {
	local, remote int
	state         string
	tx, rx        int // sent and not acknowledged; received and not read
}

// tcpSockets reads the kernel's TCP sockets, those of tcp6 too with v6.
func tcpSockets(t *testing.T, v6 bool) []tcpSocket {
	t.Helper()
	names := []string{"/proc/net/tcp"}
	if v6 {
		names = append(names, "/proc/net/tcp6")
	}
	var out []tcpSocket
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx_queue:rx_queue ...
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			var s tcpSocket
			_, err1 := fmt.Sscanf(f[1][strings.LastIndexByte(f[1], ':')+1:], "%X", &s.local)
			_, err2 := fmt.Sscanf(f[2][strings.LastIndexByte(f[2], ':')+1:], "%X", &s.remote)
			_, err3 := fmt.Sscanf(f[4], "%X:%X", &s.tx, &s.rx)
			if err1 != nil || err2 != nil || err3 != nil {
				t.Fatalf("%s: %q: not a socket's row", name, line)
			}
			s.state = f[3]
			out = append(out, s)
		}
	}
	return out
}
