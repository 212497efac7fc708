package proxy_test

import (
	"bufio"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// A client on a Unix socket is shown as Redis 7.0 shows one: addr and
// laddr both the socket's path with port 0, and the U flag.
func TestReviewIPv6UnixClientInList(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0), Backend: "test"}, func(t *testing.T, cfg proxy.Config) {
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "sluice.sock")
		ux, err := net.Listen("unix", path)
		if err != nil {
			tcp.Close()
			t.Skipf("no Unix socket: %v", err)
		}
		srv := proxy.New(cfg)
		done := make(chan error, 1)
		go func() { done <- srv.Serve(tcp, ux) }()
		t.Cleanup(func() {
			srv.Close()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})

		conn, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(conn, encode("CLIENT", "SETNAME", "ux")); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(conn)
		if v, err := readReply(r); err != nil || v != respStatus("OK") {
			t.Fatalf("CLIENT SETNAME: %v, %v", v, err)
		}

		want := " addr=" + path + ":0 laddr=" + path + ":0 name=ux "
		var line string
		for _, l := range strings.Split(command(t, tcp.Addr().String(), "CLIENT", "LIST").(string), "\n") {
			if strings.Contains(l, " name=ux ") {
				line = l
			}
		}
		if !strings.Contains(line, want) || !strings.Contains(line, " flags=U ") {
			t.Errorf("CLIENT LIST: got %q, want it to hold %q and flags=U", line, want)
		}
	})
}
