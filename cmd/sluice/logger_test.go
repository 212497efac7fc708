package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// Durations name their unit in the console format, which a person reads,
// and stay seconds in JSON, which a machine reads.
func TestLoggerDurations(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"console", `"after": "1.5s"`},
		{"json", `"after":1.5`},
	} {
		var out bytes.Buffer
		log, err := newLogger(options{logLevel: "info", logFormat: tc.format}, &out)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("shard healthy again", zap.Duration("after", 1500*time.Millisecond))
		if !strings.Contains(out.String(), tc.want) {
			t.Fatalf("%s: %q, want %s in it", tc.format, out.String(), tc.want)
		}
	}
}
