package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Under an open files limit (ulimit -n) too low for --maxclients, Redis
// lowers maxclients to the limit less 32 and says so: clients past it are
// answered "max number of clients reached". sluice said nothing and kept
// 10,000: past the limit, clients were closed unanswered (event loops) or
// left unaccepted (goroutines).
func TestMaxClientsFitsTheOpenFilesLimit(t *testing.T) {
	for _, loops := range []string{"0", "-1"} {
		t.Run("io-loops "+loops, func(t *testing.T) {
			var warned map[string]any
			addr := ""
			for sc := limitedSluice(t, "--io-loops", loops); addr == "" && sc.Scan(); {
				var line map[string]any
				json.Unmarshal(sc.Bytes(), &line)
				switch {
				case line["msg"] == "sluice started":
					addr, _ = line["listen"].(string)
				case line["level"] == "warn":
					warned = line
				}
			}
			if addr == "" {
				t.Fatal("sluice exited before it started")
			}
			if warned == nil || warned["maxclients"] != 32.0 || warned["requested"] != 10000.0 {
				t.Errorf("logged %v before it started, want a warning that maxclients is 32, not 10000", warned)
			}
			for i := range 40 {
				want := "+PONG\r\n"
				if i >= 32 {
					want = "-ERR max number of clients reached\r\n"
				}
				if got := dialPing(t, addr); got != want {
					t.Fatalf("client %d: %q, want %q", i+1, got, want)
				}
			}
		})
	}
}

// dialPing is what a new client's PING is answered.
func dialPing(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err.Error()
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err.Error()
	}
	return line
}

// With a cluster, each blocking command waits on a node connection of its
// own: maxclients leaves --max-blocking descriptors for them too.
func TestMaxClientsLeavesRoomForBlockingCommands(t *testing.T) {
	// The cluster need not answer: the limit is fitted before sluice
	// connects.
	sc := limitedSluice(t, "--cluster", "127.0.0.1:1", "--max-blocking", "10")
	if !sc.Scan() {
		t.Fatal("sluice logged nothing")
	}
	var line map[string]any
	json.Unmarshal(sc.Bytes(), &line)
	if line["level"] != "warn" || line["maxclients"] != 22.0 {
		t.Fatalf("first log line %v, want maxclients reduced to 22 (64 less 32 less 10 blocking)", line)
	}
}

// limitedSluice starts sluice with args under an open files limit of 64
// and JSON logs, and is its log, line by line.
func limitedSluice(t *testing.T, args ...string) *bufio.Scanner {
	t.Helper()
	limited := filepath.Join(t.TempDir(), "limited")
	script := "#!/bin/sh\nulimit -n 64 || exit 1\nexec " + binary(t) + " \"$@\"\n"
	if err := os.WriteFile(limited, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(limited, append([]string{"--log-format", "json", "--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return bufio.NewScanner(stderr)
}
