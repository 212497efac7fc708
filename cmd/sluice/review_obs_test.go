package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
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
