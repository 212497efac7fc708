package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
)

// An ACL file's error is printed at start and logged at a SIGHUP reload:
// a password written without its '>', or as a '#' hash, must not be in it
// (Redis's own load error names the line only), but the error must still
// say where.
func TestACLFileErrorKeepsPasswordsOut(t *testing.T) {
	for _, tc := range []struct{ text, where string }{
		{"user default on nopass\nuser api on #hunter2secret ~* +@all", "line 2, word 4"},
		{"user api on ~* hunter2secret +@all", "line 1, word 5"},
	} {
		_, err := proxy.ParseUsers(tc.text, "")
		if err == nil {
			t.Fatalf("%q: loaded, want an error", tc.text)
		}
		if msg := err.Error(); strings.Contains(msg, "hunter2") || !strings.Contains(msg, tc.where) {
			t.Errorf("%q: error %q, want %q and no password", tc.text, msg, tc.where)
		}
	}
}
