package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// Tools read role: from INFO replication before they write (health
// checks, clients that look for the primary): sluice is one, as HELLO
// says; an unknown section would answer nothing.
func TestInfoReplicationSaysPrimary(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0)}, func(t *testing.T, cfg proxy.Config) {
		c := dialRaw(t, serveConfig(t, cfg))
		for _, args := range [][]string{{"INFO", "replication"}, {"INFO"}, {"INFO", "all"}} {
			got := c.do(args...)
			if !strings.Contains(got, "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n") {
				t.Errorf("%v: %q, want a Replication section with role:master", args, got)
			}
		}
		if got := c.do("INFO", "server"); strings.Contains(got, "role:") {
			t.Errorf("INFO server: %q, want no replication section", got)
		}
	})
}
