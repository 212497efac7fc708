package proxy

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has spent in the kernel and in
// user space.
func processCPU() (sys, user time.Duration, ok bool) {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0, 0, false
	}
	var created, exited, kernel, usr syscall.Filetime
	if syscall.GetProcessTimes(h, &created, &exited, &kernel, &usr) != nil {
		return 0, 0, false
	}
	// A Filetime of a duration counts 100 ns intervals.
	ticks := func(f syscall.Filetime) time.Duration {
		return time.Duration(uint64(f.HighDateTime)<<32|uint64(f.LowDateTime)) * 100
	}
	return ticks(kernel), ticks(usr), true
}
