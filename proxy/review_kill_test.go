package proxy_test

import (
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A client killed while it pipelines runs nothing it sent that sluice
// had not read at the KILL: Redis frees a killed client with its query
// buffer. On one loop, the victim's commands and the caller's go to the
// node on the same connection, so the caller's GET right after the KILL
// comes after every command of the victim taken before the KILL.
func TestClientKillRunsNothingUnread(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: 1})
	admin := dialRaw(t, addr)
	const key = "{kill}flood"
	chunk := []byte(strings.Repeat("*2\r\n$4\r\nINCR\r\n$"+strconv.Itoa(len(key))+"\r\n"+key+"\r\n", 20))
	for i := range 40 {
		v := dialRaw(t, addr)
		id := strings.TrimSuffix(strings.TrimPrefix(v.do("CLIENT", "ID"), ":"), "\r\n")
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			for range 100000 {
				if _, err := v.c.Write(chunk); err != nil {
					return
				}
			}
		}()
		read := make(chan struct{})
		go func() {
			defer close(read)
			io.Copy(io.Discard, v.c)
		}()
		waitUntil(t, "the flood runs", func() bool { return admin.do("GET", key) != "$-1\r\n" })
		if got := admin.do("CLIENT", "KILL", "ID", id); got != ":1\r\n" {
			t.Fatalf("try %d: CLIENT KILL answered %q", i, got)
		}
		atKill := admin.do("GET", key)
		<-read // the server closed it
		<-wrote
		if got := admin.do("GET", key); got != atKill {
			t.Fatalf("try %d: %s was %q after the KILL, then %q", i, key, atKill, got)
		}
		admin.do("DEL", key)
	}
}

// As in Redis, where CLIENT KILL frees its victims before it answers, a
// client killed is gone from the next command's view: CLIENT LIST does
// not show it, a second KILL does not count it, and INFO does not count
// it as connected.
func TestClientKilledIsGoneAtTheReply(t *testing.T) {
	for _, loops := range []int{1, 2, -1} {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops})
		admin := dialRaw(t, addr)
		for i := range 30 {
			v := dialRaw(t, addr)
			id := strings.TrimSuffix(strings.TrimPrefix(v.do("CLIENT", "ID"), ":"), "\r\n")
			if got := admin.do("CLIENT", "KILL", "ID", id); got != ":1\r\n" {
				t.Fatalf("loops %d, try %d: CLIENT KILL answered %q", loops, i, got)
			}
			if got := clientLine(t, admin.do("CLIENT", "LIST", "ID", id)); got != "" {
				t.Fatalf("loops %d, try %d: the killed client is still listed: %q", loops, i, got)
			}
			if got := admin.do("CLIENT", "KILL", "ID", id); got != ":0\r\n" {
				t.Fatalf("loops %d, try %d: a second CLIENT KILL answered %q", loops, i, got)
			}
			if got := admin.do("INFO", "clients"); !strings.Contains(got, "connected_clients:1\r\n") {
				t.Fatalf("loops %d, try %d: INFO clients %q", loops, i, got)
			}
			v.c.Close()
		}
	}
}
