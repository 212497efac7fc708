package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
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
