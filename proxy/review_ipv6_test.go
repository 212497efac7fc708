package proxy_test

import (
	"bufio"
	"fmt"
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

		want := " addr=" + path + ":0 laddr=" + path + ":0 fd="
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

// A client that reached sluice over ::1 is told ::1, as a Redis 7.0 node
// bound to ::1 answers: the bare IP in SLOTS and SHARDS, "::1:port@cport"
// in NODES, and its own address bracketed in CLIENT INFO.
func TestReviewIPv6ServedOnLoopback(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0), Backend: "test"}, func(t *testing.T, cfg proxy.Config) {
		ln, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		serveOn(t, ln, cfg)
		addr := ln.Addr().String()
		port := int64(ln.Addr().(*net.TCPAddr).Port)

		id := command(t, addr, "CLUSTER", "MYID").(string)
		if got, want := fmt.Sprint(command(t, addr, "CLUSTER", "SLOTS")), fmt.Sprint([]any{[]any{int64(0), int64(16383), []any{"::1", port, id, []any{}}}}); got != want {
			t.Errorf("CLUSTER SLOTS: got %v, want %v", got, want)
		}
		node := command(t, addr, "CLUSTER", "SHARDS").([]any)[0].([]any)[3].([]any)[0].([]any)
		if got, want := fmt.Sprint(node[:8]), fmt.Sprint([]any{"id", id, "port", port, "ip", "::1", "endpoint", "::1"}); got != want {
			t.Errorf("CLUSTER SHARDS node: got %v, want %v", got, want)
		}
		if got, want := command(t, addr, "CLUSTER", "NODES"), fmt.Sprintf("%s ::1:%d@0 myself,master - 0 0 1 connected 0-16383\n", id, port); got != want {
			t.Errorf("CLUSTER NODES: got %q, want %q", got, want)
		}
		info := command(t, addr, "CLIENT", "INFO").(string)
		if !strings.Contains(info, " addr=[::1]:") || !strings.Contains(info, " laddr="+addr+" ") {
			t.Errorf("CLIENT INFO: got %q, want addr=[::1]:<port> laddr=%s", info, addr)
		}
	})
}

// Served on a Unix socket alone, INFO's tcp_port is 0, as a Redis with
// port 0 and a unixsocket says.
func TestUnixSocketAloneHasTCPPort0(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.sock")
	ux, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("no Unix socket: %v", err)
	}
	serveOn(t, ux, proxy.Config{Decider: router.NewMemory(0), Backend: "test"})
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, encode("INFO", "server")); err != nil {
		t.Fatal(err)
	}
	v, err := readReply(bufio.NewReader(conn))
	if s, _ := v.(string); err != nil || !strings.Contains(s, "\r\ntcp_port:0\r\n") {
		t.Errorf("INFO server on a Unix socket alone: %q, %v; want tcp_port:0", v, err)
	}
}
