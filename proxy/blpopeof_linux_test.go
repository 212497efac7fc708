package proxy_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// TestPassthroughBlockingAnsweredAsTheClientEnds ends the client's side
// of the connection (as nc -N does) while its blocking command, which the
// node can answer at once, is on its way: the node paused, the command
// sent to it (in its socket, unread), or a push before it still in
// flight. Redis runs what a client sent before its end, so a client of
// the node is answered both. Through sluice, the end of a client whose
// command was sent already closed the command's connection, dropping the
// node's answer on its way: the client was freed unanswered, and the
// element the node popped for it was lost. Seen as a rare loss under load
// by TestPathsAnswerAlike (PATHS_PUBSUB, seed 257). Both serving paths.
func TestPassthroughBlockingAnsweredAsTheClientEnds(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		k := "{beof" + strconv.Itoa(-loops) + "}"
		node := primaryOf(t, c, k)
		_, p, _ := net.SplitHostPort(node.Addr)
		port, _ := strconv.Atoi(p)
		cmdLen := func(cmds ...[]string) int {
			var b []byte
			for _, args := range cmds {
				bs := make([][]byte, len(args))
				for i, a := range args {
					bs[i] = []byte(a)
				}
				b = router.AppendCommand(b, bs)
			}
			return len(b)
		}
		blpop := []string{"BLPOP", k, "0"}
		rpush := []string{"RPUSH", k, "x"}
		for _, tc := range []struct {
			name string
			push bool       // the client pushes (else the list has the element)
			cmds [][]string // sent while the node is paused
			// queued: bytes the node holds unread once the command to
			// wait for is sent, straight and through sluice
			queued [2]int
			// ends: the client's end reaches the node's connection
			// (through sluice, the blocking command's)
			ends bool
		}{
			{"sent", false, [][]string{blpop}, [2]int{cmdLen(blpop), cmdLen(blpop)}, true},
			{"behind a push", true, [][]string{rpush, blpop}, [2]int{cmdLen(rpush, blpop), cmdLen(rpush)}, false},
		} {
			replies := func(at string) string {
				via := 0
				if at != node.Addr {
					via = 1
					// A connection for blocking commands, kept idle: a
					// new one could not be made to the paused node.
					node.Do(ctx, "RPUSH", k, "w")
					if got := dialRaw(t, at).do(blpop...); !strings.Contains(got, "w") {
						t.Fatalf("loops %d: BLPOP before: %q", loops, got)
					}
				}
				if !tc.push {
					node.Do(ctx, rpush...)
				}
				defer node.Do(ctx, "DEL", k)
				conn := dialRaw(t, at)
				if err := node.Pause(); err != nil {
					t.Fatal(err)
				}
				defer node.Resume()
				conn.send(tc.cmds...)
				waitUntil(t, "the command is in the node's socket", func() bool {
					return nodeHolds(t, port, "01", tc.queued[via])
				})
				if err := conn.c.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
				if tc.ends {
					waitUntil(t, "the end reaches the node's socket", func() bool {
						return nodeHolds(t, port, "08", tc.queued[via])
					})
				}
				if err := node.Resume(); err != nil {
					t.Fatal(err)
				}
				out, err := io.ReadAll(conn.br)
				if err != nil {
					out = append(out, " (read: "+err.Error()+")"...)
				}
				n, _ := node.Do(ctx, "LLEN", k).AsInt64()
				return strings.ReplaceAll(string(out), k, "K") + ", then LLEN " + strconv.FormatInt(n, 10)
			}
			want := replies(node.Addr)
			for i := range 3 {
				if got := replies(addr); got != want {
					t.Errorf("loops %d, %s, try %d:\n got %q\nwant %q", loops, tc.name, i, got, want)
					break
				}
			}
		}
	}
}

// nodeHolds reports whether the node's side of one of its connections
// (local port port), in TCP state st (hex, as /proc/net/tcp: 01
// established, 08 the peer ended its side), holds exactly n bytes unread.
func nodeHolds(t *testing.T, port int, st string, n int) bool {
	t.Helper()
	for _, s := range tcpSockets(t, false) {
		rx := s.rx
		if st == "08" {
			rx-- // the end counts as a byte read
		}
		if s.state == st && s.local == port && rx == n {
			return true
		}
	}
	return false
}
