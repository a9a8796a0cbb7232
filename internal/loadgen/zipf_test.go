package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestHarmonic(t *testing.T) {
	for _, tc := range []struct {
		n uint64
		s float64
	}{
		{1, 0.8}, {10, 1.1}, {1 << 16, 0.8}, {1<<16 + 1, 1.1},
		{1_000_000, 0.8}, {1_000_000, 1.0}, {1_000_000, 1.1}, {3_000_000, 0.5},
	} {
		var want float64
		for k := tc.n; k >= 1; k-- {
			want += math.Pow(float64(k), -tc.s)
		}
		if got := harmonic(tc.n, tc.s); math.Abs(got-want) > 1e-12*want {
			t.Errorf("harmonic(%d, %v) = %.15g, want %.15g", tc.n, tc.s, got, want)
		}
	}
}

func TestZipfRejectsBadParameters(t *testing.T) {
	for _, tc := range []struct {
		n uint64
		s float64
	}{{0, 1}, {10, 0}, {10, -1}, {10, math.NaN()}, {10, math.Inf(1)}} {
		if _, err := newZipf(tc.n, tc.s); err == nil {
			t.Errorf("newZipf(%d, %v): got no error, want one", tc.n, tc.s)
		}
	}
}

// TestZipfDistribution draws a million ranks and runs a chi-square test
// against the exact probabilities: every rank expected at least 100 times has
// its own bin, the rest share bins of about equal mass. The seed is fixed, so
// the test is deterministic; the bound is the 0.999 quantile.
func TestZipfDistribution(t *testing.T) {
	const draws = 1_000_000
	for _, tc := range []struct {
		n uint64
		s float64
	}{
		{1_000_000, 0.8}, {1_000_000, 1.1}, {1_000_000, 1.0}, {50, 0.8}, {1000, 2.5}, {7, 0.3},
	} {
		t.Run(fmt.Sprintf("n=%d/s=%v", tc.n, tc.s), func(t *testing.T) {
			z, err := newZipf(tc.n, tc.s)
			if err != nil {
				t.Fatal(err)
			}
			// Bins: [lo, hi) rank ranges with expected count >= 100.
			type bin struct {
				lo, hi uint64
				p      float64
				got    int
			}
			var bins []bin
			cur := bin{lo: 1}
			for k := uint64(1); k <= tc.n; k++ {
				cur.p += z.prob(k)
				if cur.p*draws >= 100 || k == tc.n {
					cur.hi = k + 1
					bins = append(bins, cur)
					cur = bin{lo: k + 1}
				}
			}
			if last := &bins[len(bins)-1]; last.p*draws < 100 && len(bins) > 1 { // fold a thin tail into its neighbour
				bins[len(bins)-2].hi, bins[len(bins)-2].p = last.hi, bins[len(bins)-2].p+last.p
				bins = bins[:len(bins)-1]
			}
			var total float64
			for _, b := range bins {
				total += b.p
			}
			if math.Abs(total-1) > 1e-9 {
				t.Fatalf("probabilities sum to %v, want 1", total)
			}

			r := rand.New(rand.NewPCG(1, 2))
			find := func(k uint64) int { // bins are sorted by lo
				lo, hi := 0, len(bins)
				for lo < hi {
					m := (lo + hi) / 2
					if bins[m].hi <= k {
						lo = m + 1
					} else {
						hi = m
					}
				}
				return lo
			}
			for range draws {
				k := z.sample(r)
				if k < 1 || k > tc.n {
					t.Fatalf("sample = %d, want 1..%d", k, tc.n)
				}
				bins[find(k)].got++
			}
			var chi2 float64
			for _, b := range bins {
				e := b.p * draws
				chi2 += (float64(b.got) - e) * (float64(b.got) - e) / e
			}
			df := float64(len(bins) - 1)
			// Wilson–Hilferty approximation of the 0.999 quantile (z = 3.09).
			limit := df * math.Pow(1-2/(9*df)+3.09*math.Sqrt(2/(9*df)), 3)
			if chi2 > limit {
				t.Errorf("chi-square = %.1f over %d bins, want <= %.1f", chi2, len(bins), limit)
			}
			// The head, where hot keys live, rank by rank.
			for _, b := range bins[:min(5, len(bins))] {
				want := b.p * draws
				if tol := 4 * math.Sqrt(want); math.Abs(float64(b.got)-want) > tol {
					t.Errorf("ranks %d..%d drawn %d times, want %.0f ± %.0f", b.lo, b.hi-1, b.got, want, tol)
				}
			}
		})
	}
}
