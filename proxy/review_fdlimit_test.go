package proxy_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// Without a cluster's table, sluice answers COMMAND from its own: HELP and
// LIST, which Redis 7.0 has, were "unknown subcommand", and INFO with no
// names an empty array where Redis gives every command, as COMMAND does.
func TestEmbeddedCommandSubcommands(t *testing.T) {
	// Redis 7.0's reply, byte for byte.
	help := []string{
		"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"(no subcommand)",
		"    Return details about all Redis commands.",
		"COUNT",
		"    Return the total number of commands in this Redis server.",
		"LIST",
		"    Return a list of all commands in this Redis server.",
		"INFO [<command-name> ...]",
		"    Return details about multiple Redis commands.",
		"    If no command names are given, documentation details for all",
		"    commands are returned.",
		"DOCS [<command-name> ...]",
		"    Return documentation details about multiple Redis commands.",
		"    If no command names are given, documentation details for all",
		"    commands are returned.",
		"GETKEYS <full-command>",
		"    Return the keys from a full Redis command.",
		"GETKEYSANDFLAGS <full-command>",
		"    Return the keys and the access flags from a full Redis command.",
		"HELP",
		"    Prints this help.",
	}
	wantHelp := "*" + strconv.Itoa(len(help)) + "\r\n+" + strings.Join(help, "\r\n+") + "\r\n"
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0)}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		if got := conn.do("COMMAND", "HELP"); got != wantHelp {
			t.Errorf("COMMAND HELP: %q, want %q", got, wantHelp)
		}
		count := conn.do("COMMAND", "COUNT")
		n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(count, ":")))
		all := conn.do("COMMAND")
		if got := conn.do("COMMAND", "INFO"); got != all {
			t.Errorf("COMMAND INFO: %q, want what COMMAND answers: %q", got, all)
		}
		list := conn.do("COMMAND", "LIST")
		if !strings.HasPrefix(list, "*"+strconv.Itoa(n)+"\r\n") || !strings.Contains(list, "$11\r\ncl.throttle\r\n") || !strings.Contains(list, "$4\r\nping\r\n") {
			t.Errorf("COMMAND LIST: %q, want the %d commands of COMMAND COUNT (%q)", list, n, count)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"COMMAND", "LIST", "FILTERBY", "PATTERN", "CL.*"}, "*1\r\n$11\r\ncl.throttle\r\n"},
			{[]string{"COMMAND", "LIST", "FILTERBY", "MODULE", "x"}, "*0\r\n"},
			{[]string{"COMMAND", "LIST", "FILTERBY", "PATTERN"}, "-ERR syntax error\r\n"},
			{[]string{"COMMAND", "LIST", "FOO"}, "-ERR syntax error\r\n"},
			{[]string{"COMMAND", "LIST", "FILTERBY", "BAD", "x"}, "-ERR syntax error\r\n"},
			{[]string{"COMMAND", "HELP", "x"}, "-ERR wrong number of arguments for 'command|help' command\r\n"},
			{[]string{"COMMAND", "FOO"}, "-ERR unknown subcommand 'FOO'. Try COMMAND HELP.\r\n"},
		} {
			if got := conn.do(tc.args...); got != tc.want {
				t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
			}
		}
	})
}
