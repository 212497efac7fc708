package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// A reload took a file that a restart refuses (protected mode, an ACL
// file that does not parse): it logged "config reloaded" with the
// setting in restart_needed, and the restart it asked for exited with
// status 2.
func TestReloadRefusesWhatAStartRefuses(t *testing.T) {
	dir := t.TempDir()
	path, acl := filepath.Join(dir, "sluice.yaml"), filepath.Join(dir, "users.acl")
	if err := os.WriteFile(acl, []byte("user default on nopass ~* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ before, after, aclAfter, want string }{
		{"listen: 127.0.0.1:6380\n", "listen: 0.0.0.0:6380\n", "", "protected mode"},
		{"aclfile: " + acl + "\n", "aclfile: " + acl + "\n", "user default on nopass ~* +@all bogus\n", "--aclfile"},
	} {
		writeConfig(t, path, tt.before)
		args := []string{"--config", path}
		running, err := parseFlags(args, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		srv := proxy.New(proxy.Config{Decider: router.NewMemory(0), Backend: "test"})
		writeConfig(t, path, tt.after)
		if tt.aclAfter != "" {
			if err := os.WriteFile(acl, []byte(tt.aclAfter), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		core, logs := observer.New(zapcore.InfoLevel)
		reload(zap.New(core), srv, running, args, noEnv)
		entries := logs.All()
		if len(entries) != 1 || entries[0].Message != "config not reloaded: keeping the one in force" ||
			!strings.Contains(entries[0].ContextMap()["error"].(string), tt.want) {
			t.Errorf("%q: reload logged %v, want it refused naming %s", tt.after, entries, tt.want)
		}
	}
}

// log-level is read in any case, as the other named values are; cluster
// seeds and hot-keys patterns are read with the spaces around them cut.
// Written so, they are no change a restart would make.
func TestReloadRestartNeededIgnoresCaseAndSpaces(t *testing.T) {
	for _, tt := range []struct {
		before, after string
		want          []string
	}{
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
