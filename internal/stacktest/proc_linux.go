package stacktest

import "syscall"

// diesWithParent makes a child process get SIGKILL when the test process
// dies, so that a test killed by its timeout or by hand leaves no server
// behind.
func diesWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
