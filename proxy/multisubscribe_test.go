package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A subscription command inside MULTI is refused, as the README says, and
// its error says why: it is no command sluice lacks ("does not forward
// ... yet"), it cannot be one of a transaction's. The transaction is
// aborted. Both serving paths, RESP2 and RESP3.
func TestSubscribeInsideMultiSaysWhy(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		for _, hello := range []string{"2", "3"} {
			conn := dialRaw(t, addr)
			conn.do("HELLO", hello)
			for _, cmd := range [][]string{
				{"SUBSCRIBE", "ch"}, {"PSUBSCRIBE", "p*"}, {"SSUBSCRIBE", "ch"},
				{"UNSUBSCRIBE"}, {"PUNSUBSCRIBE"}, {"SUNSUBSCRIBE"},
			} {
				if got := conn.do("MULTI"); got != "+OK\r\n" {
					t.Fatalf("MULTI: %q", got)
				}
				name := map[string]string{"SUBSCRIBE": "subscribe", "PSUBSCRIBE": "psubscribe", "SSUBSCRIBE": "ssubscribe",
					"UNSUBSCRIBE": "unsubscribe", "PUNSUBSCRIBE": "punsubscribe", "SUNSUBSCRIBE": "sunsubscribe"}[cmd[0]]
				want := "-ERR sluice cannot run '" + name + "' inside a transaction: its subscription would live on other connections than the transaction's\r\n"
				if got := conn.do(cmd...); got != want {
					t.Errorf("RESP%s: %q inside MULTI: got %q, want %q", hello, cmd, got, want)
				}
				if got := conn.do("EXEC"); got != "-EXECABORT Transaction discarded because of previous errors.\r\n" {
					t.Errorf("RESP%s: EXEC after %q: %q", hello, cmd, got)
				}
			}
		}
	})
}
