package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// A second YAML document after "---" is refused: yaml.Unmarshal read the
// first alone, so its key rules were dropped and sluice started without
// them. An empty one (a trailing "---") is nothing to lose.
func TestConfigSecondDocumentRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, "policies:\n  free: {capacity: 5, refill: 1, period: 1s}\n---\nkeys:\n  \"*\": free\n")
	if _, err := parseFlags([]string{"--config", path}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "line 4: a second YAML document") {
		t.Errorf("two documents: %v; want line 4: a second YAML document", err)
	}
	writeConfig(t, path, "policies:\n  free: {capacity: 5, refill: 1, period: 1s}\nkeys:\n  \"*\": free\n---\n# nothing\n")
	if o, err := parseFlags([]string{"--config", path}, noEnv, io.Discard); err != nil {
		t.Errorf("a trailing empty document: %v", err)
	} else if n, rules := o.policies.Len(); n != 1 || rules != 1 {
		t.Errorf("a trailing empty document: %d policies, %d rules; want 1 and 1", n, rules)
	}
}

// A policy's integer with a leading 0 is decimal, as THROTTLE reads it
// (THROTTLE k 010 1 1s has capacity 10): yaml.v3 read 010 as YAML 1.1's
// octal 8, a limit other than the one written, without a word.
func TestPolicyLeadingZeroIsDecimal(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int64
	}{{"010", 10}, {"017", 17}, {"0", 0}, {"-3", -3}} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(tt.text), &doc); err != nil {
			t.Fatal(err)
		}
		var got int64
		if err := decodeInt(doc.Content[0], &got); err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.text, got, err, tt.want)
		}
	}
}

// What THROTTLE refuses, a policy refuses: the README says a policy's
// numbers are THROTTLE's, and yaml.v3 alone took 0x10 as 16 and 1_000 as
// 1000.
func TestPolicyIntegerRefusesWhatThrottleRefuses(t *testing.T) {
	for _, text := range []string{"0x10", "0o17", "0b11", "1_000", "0_100", "+10", `"10"`, "1.5", "1e3", "-", "~", "ten"} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
			t.Fatal(err)
		}
		var got int64
		if err := decodeInt(doc.Content[0], &got); err == nil {
			t.Errorf("%s: taken as %d, want refused", text, got)
		}
	}
}

// An empty document is an empty file, as a trailing one is nothing: a file
// of "---" and comments alone (a template that rendered no setting) was
// refused at start, and by a reload, with "want a mapping of keys to
// values", though an empty file loads.
func TestConfigEmptyDocumentIsAnEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	for _, text := range []string{"", "# nothing yet\n", "---\n", "---\n# nothing yet\n", "--- # nothing\n...\n"} {
		writeConfig(t, path, text)
		if o, err := parseFlags([]string{"--config", path}, noEnv, io.Discard); err != nil {
			t.Errorf("%q: %v, want it read as no setting and no policy", text, err)
		} else if n, rules := o.policies.Len(); n != 0 || rules != 0 {
			t.Errorf("%q: %d policies, %d rules; want none", text, n, rules)
		}
	}
	// An empty first document does not hide a second one.
	writeConfig(t, path, "---\n---\nkeys:\n  \"*\": free\n")
	if _, err := parseFlags([]string{"--config", path}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "line 3: a second YAML document") {
		t.Errorf("an empty document, then one: %v; want line 3: a second YAML document", err)
	}
}
