package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// TestSubcommandMatchedInASCII: Redis matches a subcommand's name in
// ASCII only (strcasecmp), so "ıd" (dotless i), which Unicode upper-cases
// to ID, is an unknown subcommand, for a client allowed everything too.
func TestSubcommandMatchedInASCII(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0)}, func(t *testing.T, cfg proxy.Config) {
		c := dialRaw(t, serveConfig(t, cfg))
		for _, args := range [][]string{
			{"CLIENT", "ıd"}, {"CLIENT", "ſetname"}, {"CLUSTER", "ınfo"}, {"COMMAND", "ınfo"}, {"ACL", "whoamı"},
		} {
			want := "-ERR unknown subcommand '" + args[1] + "'. Try " + args[0] + " HELP.\r\n"
			if got := c.do(args...); got != want {
				t.Errorf("%q answered %q, want %q", args, got, want)
			}
		}
	})
}
