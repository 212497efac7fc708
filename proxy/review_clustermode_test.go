package proxy_test

import (
	"slices"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// An announced host goes unquoted into CLUSTER NODES, whose fields are
// separated by spaces and whose address field by ',' and '@': Redis
// refuses a cluster-announce-hostname of anything but letters, digits,
// '-' and '.', so a host that would break the line must be refused at
// start, not sent to every cluster client.
func TestReviewClusterModeAnnounceHostChars(t *testing.T) {
	for _, a := range []string{"my host:80", "a,b:80", "a@b:80", "my_host:80", "a\nb:80", "[fe80::1%eth0]:80"} {
		if err := proxy.CheckAnnounce(a); err == nil {
			t.Errorf("--announce %q taken; want it refused", a)
		}
	}
	for _, a := range []string{"myhost.example:6379", "my-host:80", "localhost:1", "10.0.0.1:80", "[::1]:80", "[::ffff:1.2.3.4]:80"} {
		if err := proxy.CheckAnnounce(a); err != nil {
			t.Errorf("--announce %q: %v; want it taken", a, err)
		}
	}
}

// CLUSTER HELP lists the subcommands sluice runs, and with a cluster it
// runs COUNTKEYSINSLOT and GETKEYSINSLOT on the slot's primary.
func TestReviewClusterModeHelpListsSlotKeys(t *testing.T) {
	addr := serve(t, router.NewMemory(0))
	help, _ := command(t, addr, "CLUSTER", "HELP").([]any)
	for _, line := range []respStatus{
		"COUNTKEYSINSLOT <slot>", "    Return the number of keys in <slot>.",
		"GETKEYSINSLOT <slot> <count>", "    Return key names stored by current node in a slot.",
	} {
		if !slices.Contains(help, any(line)) {
			t.Errorf("CLUSTER HELP has no line %q: %v", line, help)
		}
	}
}
