package main

import "testing"

// The brackets hint gives only a form that is a host:port: an address
// and a port, where Redis writes them without brackets. A zone or an
// IPv4-mapped address is IPv6 all the same; a last part that is no port
// ("::1:" or "::1:abc", an address without its port) gets no hint that
// would be refused in turn.
func TestReviewDiff29BracketsHintIsAHostPort(t *testing.T) {
	for addr, want := range map[string]string{
		"::1:7000":            ": an IPv6 address goes in brackets, [::1]:7000",
		":::6380":             ": an IPv6 address goes in brackets, [::]:6380",
		"fe80::1%eth0:7000":   ": an IPv6 address goes in brackets, [fe80::1%eth0]:7000",
		"::ffff:1.2.3.4:7000": ": an IPv6 address goes in brackets, [::ffff:1.2.3.4]:7000",
		":::":                 "",
		"::1:":                "",
		"::1:abc":             "",
		"::1:99999":           "",
		"[::1":                "",
		"127.0.0.1:99999":     "",
		"localhost":           "",
	} {
		if got := bracketsHint(addr); got != want {
			t.Errorf("bracketsHint(%q) = %q, want %q", addr, got, want)
		}
	}
}
