package detector

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestIndexMatchesMap runs random inserts and removes against a Go map,
// with hashes drawn from a few values so that tags collide, probe runs wrap
// around the slot array and backward shifts cross its end.
func TestIndexMatchesMap(t *testing.T) {
	for _, hashes := range []int{1, 7, 5000} {
		rng := rand.New(rand.NewPCG(uint64(hashes), 9))
		var x index
		var entries []entry
		var free []uint32
		want := map[string]uint32{}
		hashOf := func(k string) uint64 {
			var h uint64
			for _, b := range []byte(k) {
				h = h*31 + uint64(b)
			}
			// Tags near the top of the range probe across the array's end.
			return uint64(^uint32(0)-uint32(h%uint64(hashes))) << 32
		}
		for step := range 50_000 {
			k := fmt.Sprintf("k%d", rng.IntN(3000))
			h := hashOf(k)
			idx, ok := x.find(entries, []byte(k), h)
			wi, wok := want[k]
			if ok != wok || ok && idx != wi {
				t.Fatalf("hashes %d step %d: find(%s) = %d, %v; want %d, %v", hashes, step, k, idx, ok, wi, wok)
			}
			switch {
			case ok && rng.IntN(2) == 0:
				x.remove(h, idx)
				entries[idx] = entry{}
				free = append(free, idx)
				delete(want, k)
			case !ok:
				if n := len(free); n > 0 {
					idx, free = free[n-1], free[:n-1]
				} else {
					idx = uint32(len(entries))
					entries = append(entries, entry{})
				}
				entries[idx] = entry{key: k, hash: h}
				x.insert(h, idx, entries)
				want[k] = idx
			}
			if x.len() != len(want) {
				t.Fatalf("hashes %d step %d: len %d, want %d", hashes, step, x.len(), len(want))
			}
		}
		for k, wi := range want {
			if idx, ok := x.find(entries, []byte(k), hashOf(k)); !ok || idx != wi {
				t.Fatalf("hashes %d: final find(%s) = %d, %v; want %d", hashes, k, idx, ok, wi)
			}
		}
	}
}
