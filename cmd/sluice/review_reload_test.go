package main

import (
	"io"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// restartNeeded is what a reload logs as needing a restart once the file
// at path, read at start as before, says after.
func restartNeeded(t *testing.T, before, after string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, before)
	args := []string{"--config", path}
	running, err := parseFlags(args, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(proxy.Config{Decider: router.NewMemory(0), Backend: "test", Policies: running.policies})
	writeConfig(t, path, after)
	core, logs := observer.New(zapcore.InfoLevel)
	reload(zap.New(core), srv, running, args, noEnv)
	entries := logs.All()
	if len(entries) != 1 || entries[0].Message != "config reloaded" {
		t.Fatalf("reload logged %v, want one config reloaded", entries)
	}
	v, _ := entries[0].ContextMap()["restart_needed"].([]any)
	return toStrings(v)
}

// restart_needed names what a restart would change: a setting written in
// another case, which sluice reads as the same, is not one (log-level
// too), nor cluster seeds or hot-keys patterns written with spaces
// around them, which are cut as they are read; busy-poll
// set where it was left to its default is, since under a CPU quota the
// default is 0 and a value set anywhere is kept.
func TestReloadRestartNeededIsWhatARestartChanges(t *testing.T) {
	for _, tt := range []struct {
		before, after string
		want          []string
	}{
		{"protected-mode: yes\nfallback: local\n", "protected-mode: YES\nfallback: Local\n", nil},
		{"tls-auth-clients: no\n", "tls-auth-clients: No\n", nil},
		{"log-format: json\n", "log-format: JSON\n", nil},
		{"", "busy-poll: 200us\n", []string{"busy-poll"}},
		{"busy-poll: 200us\n", "", []string{"busy-poll"}},
		{"busy-poll: 200us\n", "busy-poll: 200µs\n", nil},
		{"", "protected-mode: no\n", []string{"protected-mode"}},
		{"log-level: info\n", "log-level: INFO\n", nil},
		{"cluster: [127.0.0.1:1, 127.0.0.1:2]\n", "cluster: \"127.0.0.1:1, 127.0.0.1:2\"\n", nil},
		{"hot-keys: \"a,b\"\n", "hot-keys: \"a, b\"\n", nil},
		{"log-level: info\n", "log-level: debug\n", []string{"log-level"}},
		{"cluster: 127.0.0.1:1\n", "cluster: 127.0.0.1:2\n", []string{"cluster"}},
		{"hot-keys: a\n", "hot-keys: [a, b]\n", []string{"hot-keys"}},
	} {
		if got := restartNeeded(t, tt.before, tt.after); !slices.Equal(got, tt.want) {
			t.Errorf("%q then %q: restart_needed %v, want %v", tt.before, tt.after, got, tt.want)
		}
	}
}

// A reload that finds no policies where some were in force (a file
// caught empty while rewritten in place) warns, naming what it took away;
// one that keeps them, or had none, does not.
func TestReloadThatEmptiesThePoliciesWarns(t *testing.T) {
	const some = "policies:\n  free: {capacity: 100, refill: 10, period: 1s}\nkeys:\n  \"k*\": free\n"
	for _, tt := range []struct {
		before, after string
		warn          bool
	}{
		{some, "", true},
		{some, "---\n# rewritten\n", true},
		{some, some, false},
		{"", "", false},
	} {
		path := filepath.Join(t.TempDir(), "sluice.yaml")
		writeConfig(t, path, tt.before)
		args := []string{"--config", path}
		running, err := parseFlags(args, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		srv := proxy.New(proxy.Config{Decider: router.NewMemory(0), Backend: "test", Policies: running.policies})
		writeConfig(t, path, tt.after)
		core, logs := observer.New(zapcore.InfoLevel)
		reload(zap.New(core), srv, running, args, noEnv)
		entries := logs.All()
		if len(entries) != 1 {
			t.Fatalf("%q then %q: logged %v, want one line", tt.before, tt.after, entries)
		}
		e := entries[0]
		warned := e.Level == zapcore.WarnLevel && e.ContextMap()["policies_before"] == int64(1) && e.ContextMap()["key_rules_before"] == int64(1)
		if warned != tt.warn {
			t.Errorf("%q then %q: logged %s %q %v, want a warning naming what was taken away: %v", tt.before, tt.after, e.Level, e.Message, e.ContextMap(), tt.warn)
		}
	}
}
