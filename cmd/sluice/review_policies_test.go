package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// A leading 0 followed by an 8 or a 9 (019, 08) is decimal too, as
// THROTTLE reads it: yaml.v3 tags such a number a float, not YAML 1.1's
// octal, so capacity: 019 was refused as "want an integer" while 017 was
// read as 17.
func TestPolicyLeadingZeroEightNineIsDecimal(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int64
	}{{"019", 19}, {"08", 8}, {"-08", -8}, {"00000000000000000009", 9}} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(tt.text), &doc); err != nil {
			t.Fatal(err)
		}
		var got int64
		if err := decodeInt(doc.Content[0], &got); err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.text, got, err, tt.want)
		}
	}
	for _, text := range []string{"019.5", "09e1", `"019"`, "!!str 019", "099999999999999999999", "0_9", "+09", "000000000000000000009"} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
			t.Fatal(err)
		}
		var got int64
		if err := decodeInt(doc.Content[0], &got); err == nil {
			t.Errorf("%s: read as %d, want it refused", text, got)
		}
	}
}

// A policy's capacity past int64 and a shadow that is no boolean are
// refused on one line, as every other bad value is: yaml.v3's own error
// ("yaml: unmarshal errors:\n  line 2: cannot unmarshal ...") split the
// message over two lines and named the line twice.
func TestPolicyBadValueIsOneLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	for _, tt := range []struct{ body, want string }{
		{"{capacity: 9223372036854775808, refill: 1, period: 1s}", `line 2: policy "a": capacity: value out of range`},
		{"{capacity: 1, refill: 18446744073709551615, period: 1s}", `line 2: policy "a": refill: value out of range`},
		{"{capacity: 1, refill: 1, period: 1s, shadow: 1}", `line 2: policy "a": shadow: want yes, no, true or false, not "1"`},
		{"{capacity: 1, refill: 1, period: 1s, shadow: maybe}", `line 2: policy "a": shadow: want yes, no, true or false, not "maybe"`},
	} {
		writeConfig(t, path, "policies:\n  a: "+tt.body+"\n")
		_, err := parseFlags([]string{"--config", path}, noEnv, io.Discard)
		if err == nil || !strings.HasSuffix(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line ending %s", tt.body, err, tt.want)
		}
	}
}
