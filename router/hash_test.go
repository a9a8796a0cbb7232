package router_test

import (
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/hotspot-dev/hotspot/router"
)

func TestHashVectors(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{ // XXH64 reference values, seed 0
		{"", 0xEF46DB3751D8E999},
		{"a", 0xD24EC4F1A98C6E5B},
		{"abc", 0x44BC2CF5AD770999},
		{"Nobody inspects the spammish repetition", 0xFBCEA83C8A378BF1},
	}
	for _, tt := range tests {
		if got := router.Hash(tt.in); got != tt.want {
			t.Errorf("Hash(%q) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
}

// TestHashMatchesXXH64 cross-checks every length through two 32-byte
// stripes and the 8/4/1-byte tails against an independent implementation.
func TestHashMatchesXXH64(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	buf := make([]byte, 200)
	for n := range len(buf) {
		for range 20 {
			for i := range n {
				buf[i] = byte(rng.Uint32())
			}
			s := string(buf[:n])
			if got, want := router.Hash(s), xxhash.Sum64String(s); got != want {
				t.Fatalf("Hash(%x) = %#x, want %#x", s, got, want)
			}
		}
	}
}
