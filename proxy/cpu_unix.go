//go:build unix

package proxy

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has spent in the kernel and in
// user space.
func processCPU() (sys, user time.Duration, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Stime.Nano()), time.Duration(ru.Utime.Nano()), true
}
