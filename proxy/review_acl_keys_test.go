package proxy_test

import (
	"fmt"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// As Redis 7.0: ~* (allkeys) replaces the patterns before it, so ACL LIST
// shows "~*" alone (a line Redis loads again), and a pattern after it is
// refused, as the file would be by Redis ("Adding a pattern after the *
// pattern (or the 'allkeys' flag) is not valid").
func TestReviewACLAllKeysReplacesPatterns(t *testing.T) {
	for _, bad := range []string{"user a on allkeys ~x", "user a on ~* ~x", "user a on ~x ~* ~y"} {
		if _, err := proxy.ParseUsers(bad, ""); err == nil {
			t.Errorf("%q: loaded, want an error", bad)
		}
	}
	us := users(t, "user default off\nuser a on >p ~x ~* resetchannels -@all\nuser b on >p ~x allkeys resetkeys ~y resetchannels -@all\nuser ops on >p ~* &* +@all", "")
	c := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us}))
	if got := c.do("AUTH", "ops", "p"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	hash := "#148de9c5a7a44d19e56cd9ae1a554bf67847afb0c58f6e12fa29ac7ddfca9940"
	want := "*4\r\n"
	for _, l := range []string{
		"user a on " + hash + " ~* resetchannels -@all",
		"user b on " + hash + " ~y resetchannels -@all",
		"user default off resetchannels -@all",
		"user ops on " + hash + " ~* &* +@all",
	} {
		want += fmt.Sprintf("$%d\r\n%s\r\n", len(l), l)
	}
	if got := c.do("ACL", "LIST"); got != want {
		t.Errorf("ACL LIST: %q, want %q", got, want)
	}
}
