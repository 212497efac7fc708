package main

import (
	"io"
	"path/filepath"
	"slices"
	"strings"
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

// A variable that looks like a setting but names none (misspelt, or in
// another case than the one read) is named at start; the settings' own,
// and variables of other programs, are not.
func TestStrayEnvironmentVariablesAreNamed(t *testing.T) {
	o, err := parseFlags(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	environ := []string{"SLUICE_LISTN=:6380", "SLUICE_LISTEN=127.0.0.1:6380", "SLUICE_log_level=debug",
		"SLUICE_LOG-LEVEL=debug", "SLUICE_HOT_KEYS=a", "PATH=/bin", "SLUICE_REQUIRE_REDIS=1", "SLUICE_=x"}
	want := []string{"SLUICE_", "SLUICE_LISTN", "SLUICE_LOG-LEVEL", "SLUICE_log_level"}
	if got := strayEnv(environ, o.settings); !slices.Equal(got, want) {
		t.Errorf("stray %v, want %v", got, want)
	}
}

// An IPv6 address and port written as Redis writes them (::1:7000) is
// refused with the bracketed form to give; other mistakes get no hint.
func TestIPv6AddressWithoutBracketsIsToldTheBrackets(t *testing.T) {
	for _, args := range [][]string{{"--cluster", "127.0.0.1:7000, ::1:7001"}, {"--listen", "::1:6380"}, {"--announce", "::1:6380"}} {
		_, err := parseFlags(args, noEnv, io.Discard)
		if err == nil || !strings.HasSuffix(err.Error(), "an IPv6 address goes in brackets, [::1]:"+args[1][len(args[1])-4:]) {
			t.Errorf("%v: %v", args, err)
		}
	}
	if _, err := parseFlags([]string{"--cluster", "localhost"}, noEnv, io.Discard); err == nil || strings.Contains(err.Error(), "brackets") {
		t.Errorf("no port: %v", err)
	}
}
