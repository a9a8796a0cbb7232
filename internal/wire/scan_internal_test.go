package wire

import (
	"math/rand/v2"
	"testing"
)

// TestScanSafe checks the eight-bytes-at-a-time scan against the plain loop,
// with every byte value at every position of a word.
func TestScanSafe(t *testing.T) {
	naive := func(b []byte, j int) int {
		for j < len(b) && strSafe[b[j]] {
			j++
		}
		return j
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 24)
	for c := range 256 {
		for pos := range len(b) {
			for trial := range 4 {
				for k := range b {
					b[k] = byte(0x20 + rng.IntN(0x60)) // mostly safe bytes
					if trial > 1 && rng.IntN(6) == 0 {
						b[k] = byte(rng.IntN(256))
					}
				}
				b[pos] = byte(c)
				for start := range 3 {
					if got, want := ScanJSONSafe(b, start), naive(b, start); got != want {
						t.Fatalf("ScanJSONSafe(%q, %d) = %d, want %d", b, start, got, want)
					}
				}
			}
		}
	}
}
