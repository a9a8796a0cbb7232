package stacktest

import "syscall"

// diesWithParent makes a child process get SIGKILL when the test process
// dies, so that a test killed by its timeout or by hand leaves no server
// behind. Linux sends it when the thread that started the child ends; Go
// ends a thread only under a goroutine that exits locked to it
// (runtime.LockOSThread), which no test here does: one that did could kill
// the servers started from that thread.
func diesWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
