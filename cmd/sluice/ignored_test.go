package main

import (
	"io"
	"path/filepath"
	"slices"
	"testing"
)

// The cluster backend's settings given to an embedded sluice are named,
// from the command line, the environment and the file alike; with
// --cluster, or when only other settings are given, nothing is.
func TestClusterSettingsIgnoredWithoutCluster(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, "hot-keys: user:*\nlog-level: warn\n")
	o, err := parseFlags([]string{"--config", path, "--backend-timeout", "20ms", "--io-loops", "1"},
		envOf(map[string]string{"SLUICE_FALLBACK": "open"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(o.ignored)
	if want := []string{"--backend-timeout", "--fallback", "--hot-keys"}; !slices.Equal(o.ignored, want) {
		t.Errorf("ignored %v, want %v", o.ignored, want)
	}
	if o, err := parseFlags([]string{"--cluster", "127.0.0.1:7000", "--backend-timeout", "20ms"}, noEnv, io.Discard); err != nil || o.ignored != nil {
		t.Errorf("with --cluster: ignored %v, %v", o.ignored, err)
	}
	if o, err := parseFlags([]string{"--io-loops", "1", "--timeout", "5"}, noEnv, io.Discard); err != nil || o.ignored != nil {
		t.Errorf("embedded settings only: ignored %v, %v", o.ignored, err)
	}
}
