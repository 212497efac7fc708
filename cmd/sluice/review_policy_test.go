package main

import (
	"io"
	"os"
	"path/filepath"
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
