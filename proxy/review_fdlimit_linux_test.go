package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

const fdChildEnv = "SLUICE_REVIEW_FDLIMIT_CHILD"

// Out of descriptors, accept fails at once, and the listener stays
// readable: a server that retries at once burns a core (redcon does, so
// the goroutine path did), one that gives up stops serving. Redis warns
// and goes on serving its clients, and accepts again once descriptors are
// free. The server runs in a child process, whose RLIMIT_NOFILE is
// lowered and then filled, so that this process keeps its own.
func TestAcceptOutOfDescriptors(t *testing.T) {
	if mode := os.Getenv(fdChildEnv); mode != "" {
		fdLimitedServer(t, mode)
		return
	}
	for _, mode := range []string{"loops", "goroutines"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptOutOfDescriptors$", "-test.count=1")
			// GORACE: a race build otherwise waits a second as it exits.
			cmd.Env = append(os.Environ(), fdChildEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				stdin.Close()
				if err := cmd.Wait(); err != nil {
					t.Errorf("the server's process: %v", err)
				}
			})
			out := bufio.NewReader(stdout)
			say := func(what string) string {
				t.Helper()
				if what != "" {
					if _, err := fmt.Fprintln(stdin, what); err != nil {
						t.Fatal(err)
					}
				}
				line, err := out.ReadString('\n')
				if err != nil {
					t.Fatalf("the server's process after %q: %v", what, err)
				}
				return strings.TrimSpace(line)
			}
			addr := say("")
			served := dialRaw(t, addr)
			if got := served.do("PING"); got != "+PONG\r\n" {
				t.Fatalf("PING: %q", got)
			}
			if got := say("fill"); got != "full" {
				t.Fatalf("filling the descriptors: %q", got)
			}

			waiting := dialRaw(t, addr) // in the listen backlog, unaccepted
			waiting.c.Write([]byte("PING\r\n"))
			before := cpuTicks(t, cmd.Process.Pid)
			waiting.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if b, err := waiting.br.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("a client past the descriptors read %q, %v; want nothing yet", b, err)
			}
			// 300 ms of a spinning accept is 30 ticks (at 100 Hz).
			if used := cpuTicks(t, cmd.Process.Pid) - before; used > 10 {
				t.Errorf("out of descriptors, the server used %d ticks of CPU in 300 ms: it spins on accept", used)
			}
			if got := served.do("PING"); got != "+PONG\r\n" {
				t.Errorf("a client served before: PING: %q", got)
			}

			if got := say("free"); got != "freed" {
				t.Fatalf("freeing the descriptors: %q", got)
			}
			waiting.c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if got := waiting.read(); got != "+PONG\r\n" {
				t.Errorf("a client accepted once descriptors are free: PING: %q", got)
			}
		})
	}
}

// fdLimitedServer serves on a loopback port it prints, then follows the
// parent's orders, one a line on stdin: "fill" lowers RLIMIT_NOFILE and
// takes every descriptor left, "free" gives them back. It ends at EOF.
func fdLimitedServer(t *testing.T, mode string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := proxy.Config{Decider: router.NewMemory(0), Backend: "test"}
	if mode == "goroutines" {
		cfg.Loops = -1
	}
	s := proxy.New(cfg)
	go s.Serve(ln)
	defer s.Close()
	fmt.Println(ln.Addr())

	var held []*os.File
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "fill":
			fds, err := os.ReadDir("/proc/self/fd")
			if err != nil {
				t.Fatal(err)
			}
			var lim syscall.Rlimit
			if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
				t.Fatal(err)
			}
			lim.Cur = uint64(len(fds) + 16)
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
				t.Fatal(err)
			}
			for i := 0; ; i++ {
				f, err := os.Open(os.DevNull)
				if err != nil {
					if !errors.Is(err, syscall.EMFILE) || i == 0 {
						t.Fatalf("opening %s: %v", os.DevNull, err)
					}
					break
				}
				held = append(held, f)
			}
			fmt.Println("full")
		case "free":
			for _, f := range held {
				f.Close()
			}
			held = nil
			fmt.Println("freed")
		}
	}
}

// cpuTicks is the user and system CPU time process pid has used.
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name, which is in parentheses: utime
	// and stime are the 14th and 15th of the whole line.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err1 := strconv.Atoi(f[11])
	stime, err2 := strconv.Atoi(f[12])
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return utime + stime
}
