package main

import (
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluice-rl/sluice/router/glob"
)

// An item of the file's hot-keys list is one pattern, commas and all; a
// comma-separated string is cut as on the command line.
func TestHotKeysListItemIsOnePattern(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, `hot-keys: ["rate:a,b", "t[,;]*", 'x\,y', "login:*"]`+"\n")
	o, err := parseFlags([]string{"--config", path}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := hotPatterns(o.hotKeys)
	if want := []string{`rate:a\,b`, "t[,;]*", `x\,y`, "login:*"}; !slices.Equal(got, want) {
		t.Fatalf("patterns %q, want %q", got, want)
	}
	if !glob.Match("rate:a,b", got[0]) {
		t.Errorf("%q does not match the key its item names", got[0])
	}
	writeConfig(t, path, "hot-keys: rate:a,login:*\n")
	if o, err = parseFlags([]string{"--config", path}, noEnv, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, want := hotPatterns(o.hotKeys), []string{"rate:a", "login:*"}; !slices.Equal(got, want) {
		t.Errorf("a comma-separated value: %q, want %q", got, want)
	}
}
