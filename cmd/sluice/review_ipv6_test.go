package main

import (
	"context"
	"net/netip"
	"testing"
)

// A --listen host name is where Go listens: one of the name's addresses.
// A name whose every address is loopback (Debian's ip6-localhost, Red Hat's
// localhost6, both ::1 in /etc/hosts) keeps sluice off the network as
// "localhost" does, so protected mode lets it start; a name with an
// address other hosts reach, or none, is refused.
func TestReviewIPv6ProtectedModeNames(t *testing.T) {
	hosts := map[string][]netip.Addr{
		"ip6-localhost": {netip.MustParseAddr("::1")},
		"localhost6":    {netip.MustParseAddr("::1"), netip.MustParseAddr("::ffff:127.0.0.1")},
		"both":          {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		"mixed":         {netip.MustParseAddr("::1"), netip.MustParseAddr("192.0.2.1")},
		"far":           {netip.MustParseAddr("2001:db8::1")},
		"none":          {},
	}
	lookup := lookupIP
	t.Cleanup(func() { lookupIP = lookup })
	lookupIP = func(_ context.Context, _, host string) ([]netip.Addr, error) {
		return hosts[host], nil
	}
	for host, want := range map[string]bool{"ip6-localhost": true, "localhost6": true, "both": true, "mixed": false, "far": false, "none": false} {
		_, err := loadUsers(options{listen: host + ":0", protectedMode: "yes"})
		if got := err == nil; got != want {
			t.Errorf("--listen %s:0 without a password: started %v (%v), want %v", host, got, err, want)
		}
		_, err = loadUsers(options{tls: tlsOptions{listen: host + ":0", authClients: "no"}, protectedMode: "yes"})
		if got := err == nil; got != want {
			t.Errorf("--tls-listen %s:0 --tls-auth-clients no without a password: started %v (%v), want %v", host, got, err, want)
		}
	}
}
