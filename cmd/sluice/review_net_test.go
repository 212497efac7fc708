package main

import (
	"slices"
	"testing"
)

// --listen 0.0.0.0:P,[::]:P is Redis's bind * -::* (redis.conf's own
// line): Redis listens on [::] for IPv6 alone (IPV6_V6ONLY), so both
// addresses bind. [::] of both families would hold P's IPv4 side too, and
// sluice could not start ("address already in use"). A wildcard IPv6
// address beside an IPv4 one of its port serves IPv6 alone; by itself it
// still serves both. (Decided here without binding: tests listen on
// loopback only.)
func TestReviewNetWildcardBesideIPv4(t *testing.T) {
	for listen, want := range map[string][]string{
		"0.0.0.0:6380,[::]:6380":    {"tcp4", "tcp6"},
		"[::]:6380 0.0.0.0:6380":    {"tcp6", "tcp4"},
		"127.0.0.1:6380,[::]:6380":  {"tcp4", "tcp6"},
		":6380,0.0.0.0:6380":        {"tcp6", "tcp4"},
		"[::]:6380":                 {"tcp"},
		":6380":                     {"tcp"},
		"0.0.0.0:6380,[::]:6381":    {"tcp4", "tcp"},
		"127.0.0.1:6380,[::1]:6380": {"tcp4", "tcp"},
		"[::]:6380,localhost:6381":  {"tcp", "tcp"},
	} {
		if got := (options{listen: listen}).listenNetworks(); !slices.Equal(got, want) {
			t.Errorf("--listen %q: listened on %q, want %q", listen, got, want)
		}
	}
}
