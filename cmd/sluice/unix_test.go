package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --unixsocket serves the same sluice as --listen (one bucket through
// both), with --unixsocketperm's mode, its clients flagged U as Redis
// flags them; the socket is removed when sluice stops, and one left by a
// process that crashed is taken over.
func TestUnixSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.sock")
	// A crashed process's socket: no one serves it, the file stays.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()

	p := start(t, binary(t), nil, "--listen", "127.0.0.1:0", "--unixsocket", path, "--unixsocketperm", "700")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("the socket's mode is %v, want 0700", fi.Mode().Perm())
	}
	for i, c := range []struct{ network, addr, want string }{
		{"unix", path, "*5\r\n:0\r\n"},
		{"tcp", p.addr, "*5\r\n:1\r\n"},
	} {
		conn, err := net.DialTimeout(c.network, c.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		if _, err := io.WriteString(conn, "THROTTLE shared 1 1 1h\r\n"); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(c.want))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != c.want {
			t.Errorf("THROTTLE through %s: %q, %v; want %q", c.addr, got, err, c.want)
		}
		br.Reset(conn)
		if i == 0 {
			if _, err := io.WriteString(conn, "CLIENT INFO\r\n"); err != nil {
				t.Fatal(err)
			}
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if want := "addr=" + path + ":0 laddr=" + path + ":0 "; !strings.Contains(line, want) || !strings.Contains(line, " flags=U ") {
				t.Errorf("CLIENT INFO through the socket: %q, want %q and flags=U", line, want)
			}
		}
		conn.Close()
	}
	stop(t, p)
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the socket is left after sluice stopped: %v", err)
	}
}

// A socket path that names a file, or a socket another process serves,
// is refused: taken over, the other's clients would fail unnoticed. Bad
// modes and paths Linux cannot bind are refused before anything starts.
func TestUnixSocketRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--unixsocket", file}, 1, "that is not a socket"},
		{[]string{"--unixsocket", live}, 1, "another process serves it"},
		{[]string{"--unixsocket", filepath.Join(dir, "s.sock"), "--unixsocketperm", "800"}, 2, `--unixsocketperm must be a mode in octal from 0 to 777, not "800"`},
		{[]string{"--unixsocketperm", "700"}, 2, "--unixsocketperm needs --unixsocket"},
		{[]string{"--unixsocket", "/" + strings.Repeat("a", 120)}, 2, "--unixsocket must be a path of at most 107 bytes"},
		{[]string{"--listen", "", "--unixsocket", ""}, 2, "nothing to serve"},
	} {
		var out strings.Builder
		// A free port: the default one may be another sluice's.
		args := append([]string{"--log-format", "json", "--listen", "127.0.0.1:0"}, c.args...)
		if code := run(args, noEnv, &out); code != c.code || !strings.Contains(out.String(), c.want) {
			t.Errorf("%q: exit %d, %q; want %d and %q", c.args, code, out.String(), c.code, c.want)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep me" {
		t.Errorf("the file named by --unixsocket: %q, %v; want it untouched", b, err)
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("the live socket: %v, want it untouched", err)
	}
}
