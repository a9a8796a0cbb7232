package router

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRadixSortStable: radixSort orders like a stable sort by position,
// so ties keep owner order (and placement stays the same in every process).
func TestRadixSortStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 3, 255, 256, 5000} {
		for _, narrow := range []bool{false, true} {
			in := make([]vpoint, n)
			for i := range in {
				pos := rng.Uint64()
				if narrow { // many ties, and bytes that are equal across all points
					pos = rng.Uint64N(64) << 40
				}
				in[i] = vpoint{pos, int32(i)}
			}
			want := slices.Clone(in)
			slices.SortStableFunc(want, func(a, b vpoint) int { return cmp.Compare(a.pos, b.pos) })
			if got := radixSort(slices.Clone(in)); !slices.Equal(got, want) {
				t.Fatalf("n=%d narrow=%v: radixSort differs from a stable sort", n, narrow)
			}
		}
	}
}
