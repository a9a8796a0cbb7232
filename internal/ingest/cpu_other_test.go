//go:build !unix

package ingest

func cpuNanos() int64 { return 0 }
