//go:build !linux

package clustertest

import "syscall"

// DieWithParent: only Linux ties a child's life to its parent's.
// Elsewhere a test binary that crashes leaves its nodes running; the next
// run's nodes take other ports.
func DieWithParent() *syscall.SysProcAttr { return nil }
