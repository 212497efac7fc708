package main

import (
	"io"
	"strings"
	"testing"
)

// A negative --backend-flush-delay was taken and, as rueidis sleeps for
// no time on one, quietly meant 0, where every other duration of sluice
// is refused out of its range.
func TestNegativeFlushDelayRefused(t *testing.T) {
	for _, how := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--backend-flush-delay", "-1ms"}, nil},
		{nil, map[string]string{"SLUICE_BACKEND_FLUSH_DELAY": "-20µs"}},
	} {
		_, err := parseFlags(how.args, envOf(how.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--backend-flush-delay") {
			t.Errorf("%v %v: %v, want an error naming --backend-flush-delay", how.args, how.env, err)
		}
	}
	if o, err := parseFlags([]string{"--backend-flush-delay", "0"}, noEnv, io.Discard); err != nil || o.flushDelay != 0 {
		t.Errorf("--backend-flush-delay 0: %v, %v; want 0, the documented off", o.flushDelay, err)
	}
}

// An address to listen on that is no host:port (a Redis user's "bind
// 127.0.0.1" or "port 6380", an IPv6 address without brackets) was
// refused by protected mode as "reachable from other hosts", which it is
// not, or (a port past 65535) by the listen after the logger started,
// without the setting's name.
func TestListenAddressChecked(t *testing.T) {
	for _, c := range []struct{ flag, addr string }{
		{"--listen", "127.0.0.1"},
		{"--listen", "6380"},
		{"--listen", "::1:6380"},
		{"--listen", "127.0.0.1:70000"},
		{"--listen", "127.0.0.1:-1"},
	} {
		_, err := parseFlags([]string{c.flag, c.addr, "--protected-mode", "yes"}, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.flag+" must be host:port") {
			t.Errorf("%s %q: %v, want an error naming %s as no host:port", c.flag, c.addr, err, c.flag)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:6380", ":6380", "localhost:6380"} {
		if _, err := parseFlags([]string{"--listen", addr}, noEnv, io.Discard); err != nil {
			t.Errorf("--listen %q: %v", addr, err)
		}
	}
}
