//go:build unix

package ingest

import "syscall"

// cpuNanos returns the CPU time (user+system) this process has used. On a
// shared machine it measures the work a benchmark does, not time spent
// waiting for a core.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
