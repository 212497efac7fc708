package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad --maxclients, --shutdown-timeout or --timeout was told one message
// naming all three (and --max-blocking one naming five), so a user who set
// one could not tell which was at fault nor what it should be.
func TestBadSettingsNamedAlone(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--maxclients", "0"}, "--maxclients must be at least 1"},
		{[]string{"--shutdown-timeout", "0s"}, "--shutdown-timeout must be positive"},
		{[]string{"--shutdown-timeout", "-1s"}, "--shutdown-timeout must be positive"},
		{[]string{"--timeout", "-1"}, "--timeout must be 0 (never) or more"},
		{[]string{"--max-blocking", "0"}, "--max-blocking must be positive"},
		{[]string{"--forward-timeout", "-1s"}, "--forward-timeout must be positive"},
		{[]string{"--hot-cooldown", "0s"}, "--hot-cooldown must be positive"},
		{[]string{"--hot-split", "17"}, "--hot-split must be from 0 to 16"},
		{[]string{"--hot-threshold", "-1"}, "--hot-threshold must be 0 (off) or more"},
	} {
		_, err := parseFlags(tt.args, noEnv, io.Discard)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
}

// Without --cluster, an ACL rule naming a command sluice does not have
// (a misspelt +throtle) was accepted without a word: the check that
// reports it ran only once a cluster's command table was read.
func TestEmbeddedReportsUnknownACLCommands(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(acl, []byte("user default on nopass ~* &* +@all -flushal\nuser api on >pw ~rate:* +throtle +ping\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := launch(t, binary(t), nil, "--listen", "127.0.0.1:0", "--aclfile", acl)
	line := p.next(t, "ACL rules name commands the embedded backend does not have: they allow or deny nothing without --cluster")
	if got := strings.Join(toStrings(line["commands"]), ","); got != "throtle,flushal" {
		t.Fatalf("reported %q, want throtle,flushal (by user, in name order)", got)
	}
	// Logged before the signals are taken: stopped once serving.
	p.next(t, "sluice started")
	stop(t, p)
}
