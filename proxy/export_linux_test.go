package proxy

// RawLoops is how many loops of the process wait in raw syscalls: a
// Server closed by another test may leave its loops counted a moment.
func RawLoops() int64 { return rawLoops.Load() }
