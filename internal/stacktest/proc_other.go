//go:build !linux

package stacktest

import "syscall"

// diesWithParent: only Linux has a parent-death signal; elsewhere a killed
// test may leave its server running.
func diesWithParent() *syscall.SysProcAttr { return nil }
