//go:build !unix

package wire_test

// cpuNanos is not available here; the cpu-ns metrics then read 0.
func cpuNanos() int64 { return 0 }
