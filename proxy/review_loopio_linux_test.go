package proxy_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// An output limit above the loop's backpressure bound (256 KiB of replies
// unsent) still closes a client that sends and never reads, as Redis
// closes it and as README promises: the loop reads it until its replies
// pass the limit, where it used to stop reading it at 256 KiB and keep it
// open, unread, for good.
func TestLoopOutputLimitAboveBackpressure(t *testing.T) {
	closedUnread(t, proxy.Config{Decider: router.NewMemory(0), Loops: 1,
		OutputLimit: proxy.OutputLimit{Hard: 1 << 20}})
	closedUnread(t, proxy.Config{Decider: router.NewMemory(0), Loops: 1,
		OutputLimit: proxy.OutputLimit{Soft: 1 << 20, SoftFor: 100 * time.Millisecond}})
}
