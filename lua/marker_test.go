package lua

import (
	"strings"
	"testing"
)

func TestMarker(t *testing.T) {
	for _, tc := range []struct {
		v    string
		ok   bool
		tags string
		gen  string
		base string
	}{
		{"~0:1700000000000:0:18c3f2a9b10:a,b,c", true, "a,b,c", "18c3f2a9b10", "0"},
		{"~1700000000000000123:1700000000000:1700000000500000000:1f:x!", true, "x", "1f", "1700000000000000123"},
		{"~0:1:0:g:", false, "", "", ""},
		{"~0:1:0::a", false, "", "", ""},
		{"~0:1:0:g:!", false, "", "", ""},
		{"~:::0:,,,", false, "", "", ""},
		{"~0:1:0:g:a,,b", false, "", "", ""},
		{"~0:x:0:g:a", false, "", "", ""},
		{"0:1:0:g:a", false, "", "", ""},
		{"~0:1:0", false, "", "", ""},
		{"1700000000000000123", false, "", "", ""},
	} {
		sp, ok := Marker(tc.v)
		if ok != tc.ok || strings.Join(sp.Tags, ",") != tc.tags || sp.Gen != tc.gen || sp.Base != tc.base {
			t.Errorf("Marker(%q) = %+v, %v; want tags %q gen %q base %q, %v", tc.v, sp, ok, tc.tags, tc.gen, tc.base, tc.ok)
		}
	}
}

// FuzzMarker: any stored value, written by sluice or by anyone else with
// access to the cluster, reads as a marker or not, without a panic; a
// marker read back names sub-buckets that place by their own tag.
func FuzzMarker(f *testing.F) {
	f.Add("~0:1700000000000:0:18c3f2a9b10:a,b,c")
	f.Add("~1700000000000000123:1700000000000:1700000000500000000:1f:x!")
	f.Add("~::::")
	f.Fuzz(func(t *testing.T, v string) {
		sp, ok := Marker(v)
		if !ok {
			return
		}
		if len(sp.Tags) == 0 || sp.Gen == "" || sp.Base == "" {
			t.Fatalf("Marker(%q) = %+v: a marker without tags, name or base", v, sp)
		}
		for _, tag := range sp.Tags {
			if tag == "" || strings.ContainsAny(tag, "{}:,!") {
				t.Fatalf("Marker(%q) = %+v: tag %q would not place a sub-bucket", v, sp, tag)
			}
		}
		for i := range sp.Tags {
			if k := sp.SubKey(i, "key"); !strings.HasPrefix(k, "sluice{"+sp.Tags[i]+"}") {
				t.Fatalf("sub-bucket key %q does not start with its tag", k)
			}
		}
	})
}
