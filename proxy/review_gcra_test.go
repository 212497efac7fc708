package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
)

// Redis 8.8 reads period with string2d over its C fast_float, which hands
// whatever its fast path does not take whole to glibc's strtod: hex floats
// parse, and a value out of range (ERANGE with ±HUGE_VAL or 0) is not a
// valid float rather than a period out of bounds. Expected values checked
// against glibc strtod under string2d's checks.
func TestGCRAPeriodAsStrtodReadsIt(t *testing.T) {
	rec := &requestRecorder{inner: unlimited{}}
	conn, r := raw(t, serve(t, rec))
	for _, tt := range []struct {
		period string
		u      int64 // emission interval in µs, 0 for an error
		err    string
	}{
		{"0x10", 16_000_000, ""},
		{"0X1p-2", 250_000, ""},
		{"-0x.8p1", 0, "ERR period must be > 0 and < 1e12"},
		{"0x1.8", 1_500_000, ""},
		{"2.5e-324", 1, ""}, // a subnormal: ERANGE, but not 0
		{"0x1p", 0, "ERR value is not a valid float"},
		{"0x", 0, "ERR value is not a valid float"},
		{"0x1_0", 0, "ERR value is not a valid float"},
		{"1e400", 0, "ERR value is not a valid float"},
		{"-1e400", 0, "ERR value is not a valid float"},
		{"1e-400", 0, "ERR value is not a valid float"},
		{"1e-324", 0, "ERR value is not a valid float"},
		{"0x1p-1075", 0, "ERR value is not a valid float"},
		{"1.7976931348623159e308", 0, "ERR value is not a valid float"},
		{"-+INF", 0, "ERR value is not a valid float"},
		{"+-inf", 0, "ERR value is not a valid float"},
		{"0e999", 0, "ERR period must be > 0 and < 1e12"},
		{"+Infinity", 0, "ERR period must be > 0 and < 1e12"},
	} {
		got := roundTrip(t, conn, r, "GCRA", "k", "0", "1", tt.period)
		reqs := rec.took()
		if tt.err != "" {
			if e, ok := got.(respError); !ok || string(e) != tt.err || len(reqs) != 0 {
				t.Errorf("period %q: got %#v and %d requests, want error %q", tt.period, got, len(reqs), tt.err)
			}
			continue
		}
		want := bucket.Interval{Capacity: 1, U: tt.u, V: 1}
		if len(reqs) != 1 || reqs[0].Op != router.Take || reqs[0].Interval != want {
			t.Errorf("period %q: got reply %v and requests %+v, want interval %+v", tt.period, got, reqs, want)
		}
	}
}
