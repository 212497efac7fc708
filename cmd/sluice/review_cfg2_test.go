package main

import (
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A one-element list was taken for any setting (timeout: [5] as 5),
// where the README gives a list to cluster, hot-keys and listen alone.
func TestConfigListOnlyForClusterHotKeysAndListen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	for _, text := range []string{"read-from-replicas: [true]\n", "\ntimeout: [5]\n", "tls-listen: [\"127.0.0.1:0\"]\n"} {
		writeConfig(t, path, text)
		key := strings.TrimSpace(strings.SplitN(text, ":", 2)[0])
		line := "line 1:"
		if text[0] == '\n' {
			line = "line 2:"
		}
		_, err := parseFlags([]string{"--config", path}, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), line) || !strings.Contains(err.Error(), key+": a list is taken by cluster, hot-keys and listen alone") {
			t.Errorf("%q: %v, want an error naming %s %s as taking no list", text, err, line, key)
		}
	}
	writeConfig(t, path, "hot-keys: [a]\ncluster: [\"127.0.0.1:1\"]\nlisten: [\"127.0.0.1:0\", \"[::1]:0\"]\n")
	if o, err := parseFlags([]string{"--config", path}, noEnv, io.Discard); err != nil || o.hotKeys != "a" || o.cluster != "127.0.0.1:1" || o.listen != "127.0.0.1:0,[::1]:0" {
		t.Errorf("hot-keys, cluster and listen as lists: %q %q %q %v", o.hotKeys, o.cluster, o.listen, err)
	}
}

// An alias or a merge key was refused, but as a policy that is no
// mapping, a key with no value or an empty pattern.
func TestConfigAliasesRefusedPlainly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	const base = "policies:\n  free: &b {capacity: 1, refill: 1, period: 1s}\n"
	for _, c := range []struct {
		text string
		line string
	}{
		{base + "  paid: *b\n", "line 3:"},
		{base + "  paid: {<<: *b, refill: 2}\n", "line 3:"},
		{base + "keys:\n  *b: free\n", "line 4:"},
		{"timeout: &t 5\nmaxclients: *t\n", "line 2:"},
		{"a: &m {timeout: 5}\n<<: *m\n", "line 2:"},
	} {
		writeConfig(t, path, c.text)
		_, err := parseFlags([]string{"--config", path}, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.line+" YAML anchors, aliases and merge keys are not supported") {
			t.Errorf("%q: %v, want %s YAML anchors, aliases and merge keys are not supported", c.text, err, c.line)
		}
	}
	// Quoted, << is a pattern like any other.
	writeConfig(t, path, "policies:\n  free: {capacity: 1, refill: 1, period: 1s}\nkeys:\n  \"<<\": free\n")
	if _, err := parseFlags([]string{"--config", path}, noEnv, io.Discard); err != nil {
		t.Errorf("a quoted << pattern: %v", err)
	}
}

// fallback-share is read as a number: 0.5 and .5 are one share, and a
// reload must not name it as needing a restart.
func TestReloadFallbackShareComparedAsANumber(t *testing.T) {
	for _, tt := range []struct {
		before, after string
		want          bool
	}{
		{"fallback-share: 0.5\n", "fallback-share: .5\n", false},
		{"fallback-share: 1\n", "fallback-share: 1.0\n", false},
		{"fallback-share: auto\n", "fallback-share: AUTO\n", false},
		{"fallback-share: 0.5\n", "fallback-share: 0.25\n", true},
		{"fallback-share: 1\n", "fallback-share: auto\n", true},
	} {
		got := restartNeeded(t, tt.before, tt.after)
		if named := slices.Contains(got, "fallback-share"); named != tt.want {
			t.Errorf("%q then %q: restart_needed %v, want fallback-share named: %v", tt.before, tt.after, got, tt.want)
		}
	}
}

// --help began with Go's bare "Usage of sluice:": nothing said what sluice
// is, what it serves without --cluster, or that every flag has a variable
// and a key in the file.
func TestHelpSaysWhatSluiceIs(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"--help"}, noEnv, &out); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	intro, rest, ok := strings.Cut(out.String(), "Usage of sluice:")
	if !ok {
		t.Fatalf("no usage line: %q", out.String())
	}
	intro = strings.Join(strings.Fields(intro), " ")
	for _, want := range []string{"rate limiter", "Redis protocol", "without --cluster", "embedded", "SLUICE_<NAME>", "upper case", "- as _", "--config"} {
		if !strings.Contains(intro, want) {
			t.Errorf("the text before the usage %q: want %q in it", intro, want)
		}
	}
	if !strings.Contains(rest, "  -backend-timeout duration\n") {
		t.Errorf("the flags' list is gone: %q", rest)
	}
}
