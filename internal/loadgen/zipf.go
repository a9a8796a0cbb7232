package loadgen

import (
	"errors"
	"math"
	"math/rand/v2"
)

// zipf draws ranks 1..n with P(k) proportional to k^-s, for any s > 0.
//
// math/rand/v2's Zipf needs s > 1, and realistic cache workloads sit on both
// sides of 1 (0.8 is common for web caches, 1.1 for social feeds), so this is
// the rejection-inversion sampler of Hörmann and Derflinger ("Rejection-
// inversion to generate variates from monotone discrete distributions", 1996),
// as in Apache Commons RNG: O(1) time and memory per draw whatever n is, about
// one log and one exp per draw, rejecting fewer than a few percent of
// candidates. An inverse-CDF table would need 8 bytes per key and a binary
// search through cache misses.
type zipf struct {
	n, s      float64
	oneMinusS float64
	hx1, hn   float64 // H(1.5) - 1 and H(n + 0.5), where H is a primitive of x^-s
	squeeze   float64 // accept k at once when k - x <= squeeze
	norm      float64 // sum of k^-s for k = 1..n
	nInt      uint64
}

func newZipf(n uint64, s float64) (*zipf, error) {
	if n == 0 {
		return nil, errors.New("loadgen: Zipf needs at least one key")
	}
	if !(s > 0) || math.IsInf(s, 0) {
		return nil, errors.New("loadgen: Zipf exponent must be > 0")
	}
	z := &zipf{n: float64(n), s: s, nInt: n, oneMinusS: 1 - s}
	z.hx1 = z.hIntegral(1.5) - 1
	z.hn = z.hIntegral(z.n + 0.5)
	z.squeeze = 2 - z.hIntegralInverse(z.hIntegral(2.5)-z.h(2))
	z.norm = harmonic(n, s)
	return z, nil
}

// sample returns a rank in 1..n.
func (z *zipf) sample(r *rand.Rand) uint64 {
	for {
		// u is uniform in (hx1, hn]; H is decreasing here, hence the order.
		u := z.hn + r.Float64()*(z.hx1-z.hn)
		x := z.hIntegralInverse(u)
		k := math.Floor(x + 0.5)
		if k < 1 {
			k = 1
		} else if k > z.n {
			k = z.n
		}
		if k-x <= z.squeeze || u >= z.hIntegral(k+0.5)-z.h(k) {
			return uint64(k)
		}
	}
}

// prob returns P(rank = k).
func (z *zipf) prob(k uint64) float64 {
	if k < 1 || k > z.nInt {
		return 0
	}
	return math.Pow(float64(k), -z.s) / z.norm
}

// h is the unnormalized probability x^-s.
func (z *zipf) h(x float64) float64 { return math.Exp(-z.s * math.Log(x)) }

// hIntegral is a primitive of h: (x^(1-s) - 1) / (1-s), or log x when s = 1,
// written so that it stays accurate as s approaches 1.
func (z *zipf) hIntegral(x float64) float64 {
	logX := math.Log(x)
	return helper2(z.oneMinusS*logX) * logX
}

func (z *zipf) hIntegralInverse(x float64) float64 {
	t := x * z.oneMinusS
	if t < -1 {
		t = -1 // rounding can push t just below -1, where log1p is undefined
	}
	return math.Exp(helper1(t) * x)
}

// helper1 is log1p(x)/x, continuous at 0.
func helper1(x float64) float64 {
	if math.Abs(x) > 1e-8 {
		return math.Log1p(x) / x
	}
	return 1 - x*(0.5-x*(1.0/3-0.25*x))
}

// helper2 is expm1(x)/x, continuous at 0.
func helper2(x float64) float64 {
	if math.Abs(x) > 1e-8 {
		return math.Expm1(x) / x
	}
	return 1 + x*0.5*(1+x*(1.0/3)*(1+0.25*x))
}

// harmonic returns the generalized harmonic number sum_{k=1..n} k^-s: the
// first terms exactly, the rest by Euler–Maclaurin (error below 1e-15 of the
// total once the exact part has 2^16 terms), so that a billion keys cost no
// more to set up than a million.
func harmonic(n uint64, s float64) float64 {
	const exact = 1 << 16
	m := min(n, exact)
	var sum float64
	for k := m; k >= 1; k-- { // smallest terms first, for accuracy
		sum += math.Pow(float64(k), -s)
	}
	if n == m {
		return sum
	}
	a, b := float64(m), float64(n)
	f := func(x float64) float64 { return math.Pow(x, -s) }
	df := func(x float64) float64 { return -s * math.Pow(x, -s-1) }
	var integral float64
	if s == 1 {
		integral = math.Log(b / a)
	} else {
		integral = (math.Pow(b, 1-s) - math.Pow(a, 1-s)) / (1 - s)
	}
	// sum_{k=a..b} f(k) = ∫_a^b f + (f(a)+f(b))/2 + (f'(b)-f'(a))/12 - ...;
	// f(a) is already in the exact part.
	tail := integral + (f(a)+f(b))/2 + (df(b)-df(a))/12 - f(a)
	return sum + tail
}
