package main

import (
	"fmt"
	"syscall"

	"go.uber.org/zap"
)

// reservedFiles is what sluice keeps of its open files limit for
// descriptors other than its clients', as Redis's CONFIG_MIN_RESERVED_FDS.
const reservedFiles = 32

// fitMaxClients raises the soft open files limit to what maxClients needs,
// up to the hard limit; under a lower limit it lowers maxClients, as
// Redis does, so that a client past it is told "max number of clients
// reached" rather than closed or left unaccepted for want of a descriptor.
func fitMaxClients(maxClients int, log *zap.Logger) (int, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open files limit", zap.Error(err))
		return maxClients, nil
	}
	need := uint64(maxClients) + reservedFiles
	if lim.Cur >= need {
		return maxClients, nil
	}
	// Go raises the soft limit to the hard one as it starts; not on
	// every system (macOS caps it).
	if raised := (syscall.Rlimit{Cur: min(need, lim.Max), Max: lim.Max}); raised.Cur > lim.Cur {
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	if lim.Cur >= need {
		return maxClients, nil
	}
	if lim.Cur <= reservedFiles {
		return 0, fmt.Errorf("an open files limit (ulimit -n) of %d is not enough to start: at least %d", lim.Cur, reservedFiles+1)
	}
	fit := int(lim.Cur) - reservedFiles
	log.Warn("maxclients reduced to fit the open files limit: raise ulimit -n for more",
		zap.Int("requested", maxClients), zap.Int("maxclients", fit), zap.Uint64("open_files_limit", lim.Cur))
	return fit, nil
}
