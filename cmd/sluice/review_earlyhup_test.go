//go:build linux

package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// openingFIFO waits until a thread of pid sleeps in open(2) of a FIFO
// with no writer yet: wait_for_partner is where the kernel parks it.
func openingFIFO(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		wchans, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "wchan"))
		for _, w := range wchans {
			if b, _ := os.ReadFile(w); string(b) == "wait_for_partner" {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("sluice (pid %d) never blocked opening its FIFO", pid)
}

// feed writes text to the FIFO at path for the reader waiting on it.
// Without blocking: a reader killed meanwhile is an error, not a hang.
func feed(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// A SIGHUP that arrives while sluice is still starting (config
// management signalling right after writing the file, racing a start)
// must not kill it, as it does not kill Redis, which ignores SIGHUP from
// the top of main. The --config file is a FIFO, so the process is held
// in its first read of it, before any handler, while the signal comes.
func TestSIGHUPWhileStartingIsIgnored(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := launch(t, binary(t), nil, "--listen", "127.0.0.1:0", "--config", fifo)
	cmd := p.cmd
	died := func(what string) {
		t.Helper()
		for range p.lines {
		}
		t.Fatalf("%s: sluice exited: %v", what, cmd.Wait())
	}

	openingFIFO(t, cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := feed(fifo, "policies:\n  free: {capacity: 3, refill: 1, period: 1h}\n"); err != nil {
		died("SIGHUP while reading --config at start (" + err.Error() + ")")
	}
	var started map[string]any
	for line := range p.lines {
		if line["msg"] == "sluice started" {
			started = line
			break
		}
	}
	if started == nil {
		died("SIGHUP while reading --config at start")
	}
	p.addr, _ = started["listen"].(string)
	ping(t, p.addr)

	// SIGHUP still reloads once serving.
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	openingFIFO(t, cmd.Process.Pid)
	if err := feed(fifo, "policies:\n  free: {capacity: 3, refill: 1, period: 1h}\n  paid: {capacity: 9, refill: 1, period: 1s}\n"); err != nil {
		t.Fatal(err)
	}
	if line := p.nextLine(t); line["msg"] != "config reloaded" || line["policies"] != 2.0 {
		t.Fatalf("after SIGHUP: %v, want config reloaded with 2 policies", line)
	}
	ping(t, p.addr)
	stop(t, p)
}

// ping sends PING on a connection of its own and wants PONG.
func ping(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "+PONG\r\n" {
		t.Fatalf("PING: %q, %v; want +PONG", got, err)
	}
}
