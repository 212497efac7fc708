package main

import (
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
	}{{"019", 19}, {"08", 8}, {"0_9", 9}, {"+09", 9}, {"-08", -8}, {"0000000000000000000000000009", 9}} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(tt.text), &doc); err != nil {
			t.Fatal(err)
		}
		var got int64
		if err := decodeInt(doc.Content[0], &got); err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.text, got, err, tt.want)
		}
	}
	for _, text := range []string{"019.5", "09e1", `"019"`, "!!str 019", "099999999999999999999"} {
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
