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
