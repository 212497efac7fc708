//go:build unix

package main

import (
	"fmt"
	"syscall"

	"go.uber.org/zap"
)

// reservedFiles is what sluice keeps of its open files limit for
// descriptors other than its clients', as Redis's CONFIG_MIN_RESERVED_FDS.
const reservedFiles = 32

// fitMaxClients raises the soft open files limit to what maxClients needs
// beside reserve descriptors of sluice's own (its blocking commands'
// connections), up to the hard limit; under a lower limit it lowers
// maxClients, as Redis does, so that a client past it is told "max number
// of clients reached" rather than closed or left unaccepted for want of a
// descriptor. (Subscribers' and WATCHing clients' own node connections
// are not bounded, so they can still run a tight limit out.)
func fitMaxClients(maxClients, reserve int, log *zap.Logger) (int, error) {
	reserve += reservedFiles
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open files limit", zap.Error(err))
		return maxClients, nil
	}
	// Rlimit's fields are int64 on FreeBSD and DragonFly, uint64
	// elsewhere: read as uint64, set through setRlim.
	cur, hard := uint64(lim.Cur), uint64(lim.Max)
	need := uint64(maxClients) + uint64(reserve)
	if cur >= need {
		return maxClients, nil
	}
	// Go raises the soft limit to the hard one as it starts; not on
	// every system (macOS caps it).
	if want := min(need, hard); want > cur {
		raised := lim
		setRlim(&raised.Cur, want)
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			cur = want
		}
	}
	if cur >= need {
		return maxClients, nil
	}
	if cur <= uint64(reserve) {
		return 0, fmt.Errorf("an open files limit (ulimit -n) of %d is not enough to start: at least %d", cur, reserve+1)
	}
	fit := int(cur) - reserve
	log.Warn("maxclients reduced to fit the open files limit: raise ulimit -n for more",
		zap.Int("requested", maxClients), zap.Int("maxclients", fit), zap.Uint64("open_files_limit", cur))
	return fit, nil
}

func setRlim[T int64 | uint64](f *T, v uint64) { *f = T(v) }
