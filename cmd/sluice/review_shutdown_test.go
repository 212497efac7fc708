package main

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A SIGTERM that comes while sluice waits for the cluster at start (up to
// 2 s) stops it there: it ends the wait, so the cluster must not be said
// unreachable ("context canceled"), and no address is listened on nor
// "sluice started" logged for a process already told to stop.
func TestSignalWhileWaitingForTheClusterStopsBeforeServing(t *testing.T) {
	// A node that takes connections and answers nothing: the wait lasts.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	}()
	p := launch(t, binary(t), nil, "--listen", "127.0.0.1:0", "--cluster", ln.Addr().String())
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("sluice never dialled its seed")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for line := range p.lines {
		msg, _ := line["msg"].(string)
		msgs = append(msgs, msg)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("sluice exited with %v after a SIGTERM while starting, want status 0; log: %q", err, msgs)
	}
	for _, msg := range msgs {
		switch msg {
		case "sluice started", "cluster not reachable yet: answering by the fallback policy until it is":
			t.Errorf("logged %q after the SIGTERM came while starting; log: %q", msg, msgs)
		}
	}
}

// A --client-output-buffer-limit whose soft seconds do not fit is told the
// bound it passed, not "must be 0 or more", which it is.
func TestOutputLimitSecondsTooBigExplained(t *testing.T) {
	var l outputLimit
	err := l.Set("normal 0 0 99999999999")
	if err == nil || !strings.Contains(err.Error(), "2147483647") {
		t.Errorf("Set(normal 0 0 99999999999): %v; want an error naming the bound, 2147483647", err)
	}
	for _, v := range []string{"normal 0 0 -1", "normal 0 0 x"} {
		if err := l.Set(v); err == nil || !strings.Contains(err.Error(), "from 0 to 2147483647") {
			t.Errorf("Set(%s): %v; want an error naming the range", v, err)
		}
	}
	if err := l.Set("normal 0 0 2147483647"); err != nil {
		t.Errorf("Set(normal 0 0 2147483647): %v", err)
	}
}
