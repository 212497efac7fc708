package clustertest

import "syscall"

// DieWithParent is the SysProcAttr of a process a test starts (a node,
// or a lone redis-server of its own) that dies with the test binary, even
// when the binary crashes.
func DieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
