package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// TestGetKeysUnknownSubcommand: redis-server 7.0 looks a COMMAND GETKEYS
// target up with its subcommand, so a container's subcommand it lacks is
// "Invalid command specified", as an unknown command is, not "no key
// arguments"; the container alone is a command without keys.
func TestGetKeysUnknownSubcommand(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0)}, func(t *testing.T, cfg proxy.Config) {
		c := dialRaw(t, serveConfig(t, cfg))
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"COMMAND", "GETKEYS", "client", "bogus"}, "-ERR Invalid command specified\r\n"},
			{[]string{"COMMAND", "GETKEYSANDFLAGS", "CLUSTER", "bogus", "x"}, "-ERR Invalid command specified\r\n"},
			{[]string{"COMMAND", "GETKEYS", "acl", "ıd"}, "-ERR Invalid command specified\r\n"},
			{[]string{"COMMAND", "GETKEYS", "client", "info"}, "-ERR The command has no key arguments\r\n"},
			{[]string{"COMMAND", "GETKEYS", "client"}, "-ERR wrong number of arguments for 'command|getkeys' command\r\n"},
			{[]string{"COMMAND", "GETKEYS", "command", "x", "y"}, "-ERR Invalid command specified\r\n"},
		} {
			if got := c.do(tt.args...); got != tt.want {
				t.Errorf("%q answered %q, Redis %q", tt.args, got, tt.want)
			}
		}
	})
}
