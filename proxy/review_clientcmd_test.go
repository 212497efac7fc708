package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// Redis matches CLIENT's options with strcasecmp, ASCII only; sluice
// upper-cased them with Unicode's rules, so that "ſkip" (long s) was SKIP
// and dropped the next reply where Redis answers a syntax error,
// "lıb-name" (dotless i) set the library's name, and TYPE "REPLİCA" was
// a type.
func TestClientOptionsAreASCII(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0)}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		for _, tc := range []struct {
			cmd  []string
			want string
		}{
			{[]string{"CLIENT", "REPLY", "ſkip"}, "-ERR syntax error\r\n"},
			{[]string{"ECHO", "a"}, "$1\r\na\r\n"},
			{[]string{"CLIENT", "REPLY", "oﬀ"}, "-ERR syntax error\r\n"},
			{[]string{"CLIENT", "NO-EVICT", "oﬀ"}, "-ERR syntax error\r\n"},
			{[]string{"CLIENT", "SETINFO", "lıb-name", "x"}, "-ERR Unrecognized option 'lıb-name'\r\n"},
			{[]string{"CLIENT", "SETINFO", "lıb-ver", "x"}, "-ERR Unrecognized option 'lıb-ver'\r\n"},
			{[]string{"CLIENT", "LIST", "TYPE", "REPLİCA"}, "-ERR Unknown client type 'REPLİCA'\r\n"},
			{[]string{"CLIENT", "LIST", "TYPE", "REPLICA"}, "$0\r\n\r\n"},
			{[]string{"CLIENT", "REPLY", "Skip"}, ""},
			{[]string{"ECHO", "b"}, ""},
			{[]string{"ECHO", "c"}, "$1\r\nc\r\n"},
		} {
			conn.send(tc.cmd)
			if tc.want == "" {
				continue
			}
			if got := conn.read(); got != tc.want {
				t.Errorf("%q: %q, want %q", tc.cmd, got, tc.want)
			}
		}
	})
}

// Redis queues nothing once a command of a transaction was refused
// (queueMultiCommand), though it answers QUEUED: CLIENT LIST's multi=
// stops counting. sluice counted, and held, the commands after the
// refusal for an EXEC that can only abort.
func TestClientListMultiStopsAtRefusal(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		conn, other := dialRaw(t, addr), dialRaw(t, addr)
		id := strings.TrimSuffix(strings.TrimPrefix(conn.do("CLIENT", "ID"), ":"), "\r\n")
		for _, tc := range []struct {
			cmd  []string
			want string
		}{
			{[]string{"MULTI"}, "+OK\r\n"},
			{[]string{"SET", "a", "1"}, "+QUEUED\r\n"},
			{[]string{"FOO"}, "-ERR unknown command 'FOO', with args beginning with: \r\n"},
			{[]string{"GET", "a"}, "+QUEUED\r\n"},
			{[]string{"GET", "a"}, "+QUEUED\r\n"},
		} {
			if got := conn.do(tc.cmd...); got != tc.want {
				t.Fatalf("loops %d: %q: %q, want %q", loops, tc.cmd, got, tc.want)
			}
		}
		if got := other.do("CLIENT", "LIST", "ID", id); !strings.Contains(got, " flags=x ") || !strings.Contains(got, " multi=1 ") {
			t.Errorf("loops %d: CLIENT LIST: %q, want flags=x and multi=1", loops, got)
		}
		if got := conn.do("EXEC"); got != "-EXECABORT Transaction discarded because of previous errors.\r\n" {
			t.Errorf("loops %d: EXEC: %q", loops, got)
		}
	}
}
