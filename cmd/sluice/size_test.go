package main

import (
	"io"
	"testing"
	"time"
)

func TestByteSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true}, {"512mb", 512 << 20, true}, {"512MB", 512 << 20, true},
		{"1gb", 1 << 30, true}, {"1Gb", 1 << 30, true}, {"64kb", 64 << 10, true}, {"2k", 2000, true},
		{"3m", 3e6, true}, {"1g", 1e9, true}, {"100b", 100, true}, {"0", 0, true},
		{"", 0, false}, {"mb", 0, false}, {"-1mb", 0, false}, {"+1mb", 0, false}, {"1 mb", 0, false},
		{"1.5gb", 0, false}, {"1tb", 0, false}, {"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775807kb", 0, false}, {"99999999999999999999", 0, false},
	} {
		var s byteSize
		err := s.Set(tt.in)
		if (err == nil) != tt.ok || int64(s) != tt.want {
			t.Errorf("%q: got %d, %v, want %d (ok %v)", tt.in, s, err, tt.want, tt.ok)
		}
	}
	for n, want := range map[byteSize]string{512 << 20: "512mb", 1 << 30: "1gb", 3 << 10: "3kb", 1000: "1000", 0: "0", 1536 << 20: "1536mb"} {
		if got := n.String(); got != want {
			t.Errorf("%d: got %q, want %q", n, got, want)
		}
	}
}

func TestFramingFlags(t *testing.T) {
	o, err := parseFlags(nil, noEnv, io.Discard)
	if err != nil || o.protoMaxBulkLen != 512<<20 || o.queryBufferLimit != 1<<30 {
		t.Fatalf("defaults: %d, %d, %v; want Redis's 512mb and 1gb", o.protoMaxBulkLen, o.queryBufferLimit, err)
	}
	env := map[string]string{"SLUICE_PROTO_MAX_BULK_LEN": "2mb", "SLUICE_CLIENT_QUERY_BUFFER_LIMIT": "4MB"}
	o, err = parseFlags([]string{"--proto-max-bulk-len", "3mb"}, envOf(env), io.Discard)
	if err != nil || o.protoMaxBulkLen != 2<<20 || o.queryBufferLimit != 4<<20 {
		t.Fatalf("environment over flag: %d, %d, %v; want 2 MiB and 4 MiB", o.protoMaxBulkLen, o.queryBufferLimit, err)
	}
	if o, err := parseFlags([]string{"--throttle-max-key-len", "256"}, noEnv, io.Discard); err != nil || o.maxKeyLen != 256 {
		t.Errorf("--throttle-max-key-len 256: %d, %v", o.maxKeyLen, err)
	}
	for _, args := range [][]string{{"--proto-max-bulk-len", "512kb"}, {"--client-query-buffer-limit", "lots"},
		{"--throttle-max-key-len", "0"}, {"--throttle-max-key-len", "2mb"}} {
		if _, err := parseFlags(args, noEnv, io.Discard); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

func TestOutputLimitFlag(t *testing.T) {
	var l outputLimit
	if err := l.Set("normal 256mb 64mb 60"); err != nil || l.Hard != 256<<20 || l.Soft != 64<<20 || l.SoftFor != time.Minute {
		t.Errorf("normal 256mb 64mb 60: %+v, %v", l, err)
	}
	if l.String() != "normal 268435456 67108864 60" {
		t.Errorf("String: %q", l.String())
	}
	for _, bad := range []string{"", "normal 1 2", "pubsub 32mb 8mb 60", "normal x 0 0", "normal 0 0 -1"} {
		if err := l.Set(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
