package proxy_test

import (
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// TestPathsAnswerAsRedis (PATHS_REDIS=1; PATHS_SEEDS, PATHS_SEED as for
// TestPathsAnswerAlike) sends the pipelines of TestPathsAnswerAlike,
// without sluice's own commands and INFO and with every tag on one slot
// (no CROSSSLOT), to a lone redis-server and to both serving paths: the
// two paths could be wrong alike. A RESET and a QUIT end each pipeline
// (Redis drops what it has yet to write at a client's end, and does not
// close one whose QUIT came with its replies off). Left out, as known
// difference: inline lines over 64 KiB (sluice refuses them at once).
func TestPathsAnswerAsRedis(t *testing.T) {
	if os.Getenv("PATHS_REDIS") != "1" {
		t.Skip("PATHS_REDIS=1 runs it")
	}
	raddr := startRedis(t)
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	addrs := [3]string{
		raddr,
		serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: 0}),
		serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: -1}),
	}
	tags := [3]map[int]string{slotTags("R"), slotTags("L"), slotTags("G")}
	names := [3]string{"redis", "loops", "goroutines"}
	seeds, first := 200, 1
	if s := os.Getenv("PATHS_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("PATHS_SEED"); s != "" {
		first, _ = strconv.Atoi(s)
		seeds = 1
	}
	run := strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	failed := 0
	for seed := first; seed < first+seeds && failed < 5; seed++ {
		p := asRedis(genPipeline(seed))
		var streams [3][]byte
		for i := range 3 {
			var err error
			if streams[i], err = p.runToQuit(addrs[i], tags[i], run, seed); err != nil {
				t.Fatalf("seed %d, %s: %v\n%s", seed, names[i], err, p)
			}
			streams[i] = p.rename(streams[i], tags[i], tags[0], run, seed)
			streams[i] = helloReply.ReplaceAll(streams[i], []byte("+HELLO\r\n"))
		}
		for i := 1; i < 3; i++ {
			if d := diffReplies(streams[0], streams[i]); d != "" {
				failed++
				t.Errorf("seed %d, redis (as loops) against %s (as goroutines): %s\npipeline:\n%s", seed, names[i], d, p)
				if dir := os.Getenv("PATHS_DUMP"); dir != "" {
					os.WriteFile(dir+"/"+strconv.Itoa(seed)+".redis", streams[0], 0o644)
					os.WriteFile(dir+"/"+strconv.Itoa(seed)+"."+names[i], streams[i], 0o644)
				}
			}
		}
	}
}

// helloReply is HELLO's reply in either protocol, whose server fields
// differ between sluice and a lone Redis.
var helloReply = regexp.MustCompile(`(?s)[*%]1?[47]\r\n\$6\r\nserver\r\n.*?\$7\r\nmodules\r\n\*0\r\n`)

// asRedis is p without what a lone Redis cannot answer as sluice does:
// sluice's own commands, INFO, keys of several slots.
func asRedis(p *pipeline) *pipeline {
	q := &pipeline{splits: p.splits}
	for range p.slots {
		q.slots = append(q.slots, p.slots[0])
	}
	multi := false
	for i, c := range p.cmds {
		switch c[0] {
		case "THROTTLE", "CL.THROTTLE", "GCRA", "THROTTLE.RESET", "INFO":
			continue
		case "CLIENT", "SELECT", "HELLO":
			if multi { // sluice's own: refused in MULTI, as documented
				continue
			}
		case "MULTI":
			multi = true
		case "EXEC", "DISCARD", "RESET":
			multi = false
		}
		if p.inline[i] && len(strings.Join(c, " ")) > 64<<10 {
			// sluice refuses an inline line over 64 KiB as it comes;
			// Redis only once that much is unread without its end.
			continue
		}
		if c[0] == "QUIT" {
			break // what follows is never read
		}
		if strings.HasPrefix(c[0], "*") && len(c[0]) > 2 {
			continue // cut short, a protocol error: the QUIT below ends it
		}
		q.cmds = append(q.cmds, c)
		q.inline = append(q.inline, p.inline[i])
	}
	// Redis 7.0 does not close a client whose QUIT (or protocol error)
	// came while its replies were off or skipped: it waits for a reply to
	// write. So a RESET turns them on (and ends a transaction and the
	// subscriptions, in which CLIENT REPLY ON would be refused) first.
	q.cmds = append(q.cmds, []string{"RESET"}, []string{"QUIT"})
	q.inline = append(q.inline, false, true)
	return q
}

// runToQuit is run with the pipeline's end told by its QUIT, not by
// ending the client's side: Redis frees a client at its end, dropping the
// replies it has yet to write.
func (p *pipeline) runToQuit(addr string, tags map[int]string, run string, seed int) ([]byte, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	b := p.bytes(tags, run, seed)
	if pathsWide {
		return p.sendAndRead(c, b, false)
	}
	at := 0
	for _, s := range append(slices.Clip(p.splits), len(b)) {
		if s = min(s, len(b)); s <= at {
			continue
		}
		if _, err := c.Write(b[at:s]); err != nil {
			return nil, err
		}
		at = s
	}
	return io.ReadAll(c)
}

// startRedis starts a lone redis-server on a free loopback port, stopped
// at the test's end.
func startRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.SysProcAttr = clustertest.DieWithParent()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitUntil(t, "redis-server answers", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		c.Write([]byte("PING\r\n"))
		b := make([]byte, 7)
		n, _ := c.Read(b)
		return string(b[:n]) == "+PONG\r\n"
	})
	return addr
}
