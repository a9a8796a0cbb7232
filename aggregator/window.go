package aggregator

import (
	"math"
	"math/bits"
)

// window counts accesses in a ring of fixed-size buckets. Bucket indexes are
// absolute (time since the Unix epoch divided by the bucket size), so every
// window of a process shares one alignment. Counts go to the bucket of the
// event time they happened at (see addRange); the window slides on the
// receipt clock, so what happened before its oldest bucket is never counted.
//
// Invariant: sum is the total of b, and b holds exactly the buckets
// (last-len(b), last]; older counts have been subtracted.
//
// The rate is read over the n buckets that end at eend (evalTo), which may
// lie behind last: the buckets after eend are still being filled by
// detectors that lag. esum is the total of the buckets (eend-n, eend] that
// are in b.
type window struct {
	b    []uint64
	sum  uint64
	last int64 // absolute index of the newest bucket in b
	n    int64 // buckets of the evaluated window, <= len(b)
	eend int64 // newest bucket of the evaluated window
	esum uint64
}

// noEval is an eend before any bucket: the evaluated window is empty.
const noEval = math.MinInt64 / 2

// newWindow returns a window of n buckets that evaluates all of them.
func newWindow(n int, now int64) window { return newRing(n, n, now) }

// newRing returns a window that keeps size buckets and evaluates n of them.
func newRing(size, n int, now int64) window {
	return window{b: make([]uint64, size), last: now, n: int64(n), eend: noEval}
}

// counted adds c, just added to bucket k, to esum when k is evaluated.
func (w *window) counted(k int64, c uint64) {
	if k > w.eend-w.n && k <= w.eend {
		w.esum += c
	}
}

// from returns the total of the buckets from bucket k on.
func (w *window) from(k int64) uint64 {
	size := int64(len(w.b))
	var s uint64
	for i := max(k, w.last-size+1); i <= w.last; i++ {
		s += w.b[i%size]
	}
	return s
}

// evalTo returns the total of the n buckets ending at bucket end (those
// still in the window; a bucket newer than last has no counts yet). It is
// small enough to inline: a sweep asks every key for the same end several
// times.
func (w *window) evalTo(end int64) uint64 {
	if end == w.eend {
		return w.esum
	}
	return w.moveEval(end)
}

// leading returns the total of the n buckets ending at bucket end+1: the
// evaluated window (ending at end) moved on by the bucket after it, which
// detectors may still be filling. It is a lower bound of what that window
// will hold once the bucket is complete.
func (w *window) leading(end int64) uint64 {
	return w.evalTo(end) + w.at(end+1) - w.at(end+1-w.n)
}

// at returns bucket k's count: 0 for a bucket not in b.
func (w *window) at(k int64) uint64 {
	size := int64(len(w.b))
	if k > w.last || k <= w.last-size {
		return 0
	}
	return w.b[k%size]
}

// moveEval moves the evaluated window to end at bucket end and returns its
// total (see evalTo).
func (w *window) moveEval(end int64) uint64 {
	size := int64(len(w.b))
	lo, hi := w.last-size+1, w.last // the buckets in b
	if d := end - w.eend; d > 0 && d < w.n {
		// Forward by a few buckets (each sweep): add the new ones, take
		// off those that left. A bucket cleared by advance was taken off
		// then and reads 0 now.
		for i := max(w.eend+1, lo); i <= min(end, hi); i++ {
			w.esum += w.b[i%size]
		}
		for i := max(w.eend-w.n+1, lo); i <= min(end-w.n, hi); i++ {
			w.esum -= w.b[i%size]
		}
		w.eend = end
		return w.esum
	}
	var s uint64
	for i := max(end-w.n+1, lo); i <= min(end, hi); i++ {
		s += w.b[i%size] // a subset of sum: cannot overflow
	}
	w.eend, w.esum = end, s
	return w.esum
}

// advance slides the window so that now is its newest bucket. A window never
// moves backwards: a now older than last leaves it unchanged.
func (w *window) advance(now int64) {
	d := now - w.last
	if d <= 0 {
		return
	}
	n := int64(len(w.b))
	if d >= n {
		clear(w.b)
		w.sum, w.esum = 0, 0
	} else {
		for i := w.last + 1; i <= now; i++ {
			s := &w.b[i%n]
			w.sum -= *s
			if old := i - n; old > w.eend-w.n && old <= w.eend {
				w.esum -= *s
			}
			*s = 0
		}
	}
	w.last = now
}

// add counts n accesses in bucket now (after sliding to it). The window
// saturates: sum never exceeds MaxUint64 (the excess is dropped), so no
// bucket does either and the invariant holds.
func (w *window) add(now int64, n uint64) {
	w.advance(now)
	n = satAdd(w.sum, n) - w.sum
	w.b[w.last%int64(len(w.b))] += n
	w.sum += n
	w.counted(w.last, n)
}

// addSpan counts n accesses that happened over the span newest buckets
// ending at now: an equal share in each (the remainder in the newest), and
// nothing for the part of the span older than the window, since those
// accesses are outside the window already. A span below 1 means 1. It
// reports how many of the n accesses it counted.
func (w *window) addSpan(now int64, span int64, n uint64) uint64 {
	if span <= 1 {
		w.add(now, n)
		return n
	}
	w.advance(now)
	size := int64(len(w.b))
	share, rem := n/uint64(span), n%uint64(span)
	var counted uint64
	for i := int64(0); i < min(span, size); i++ {
		c := share
		if i == 0 {
			c += rem
		}
		c = satAdd(w.sum+counted, c) - (w.sum + counted) // saturate as add does
		w.b[(w.last-i)%size] += c
		w.counted(w.last-i, c)
		counted += c
	}
	w.sum += counted
	return counted
}

// addTime slides the window to now and counts n accesses that happened
// evenly over the event time [from, end] (nanoseconds since the epoch;
// bucket is the bucket length): each bucket gets the share of n its overlap
// with that time is, rounded so that the shares add up, and the part older
// than the window is not counted at all. An end after the window's newest
// bucket counts as in it. It reports how many of the n it counted.
func (w *window) addTime(now, from, end, bucket int64, n uint64) uint64 {
	w.advance(now)
	size := int64(len(w.b))
	if hi := (w.last + 1) * bucket; end >= hi {
		end = hi - 1
	}
	if from >= end {
		b := end / bucket
		if b <= w.last-size {
			return 0
		}
		n = satAdd(w.sum, n) - w.sum // saturate as add does
		w.b[b%size] += n
		w.sum += n
		w.counted(b, n)
		return n
	}
	total := float64(end - from)
	first := max(from/bucket, w.last-size+1)
	var counted uint64
	// cum(t) is how many of the n happened by t, rounded: a bucket's share
	// is the difference at its two ends, so the shares add up to n.
	cum := func(t int64) uint64 {
		if t >= end {
			return n
		}
		v := float64(n)*float64(max(t-from, 0))/total + 0.5
		if v >= math.MaxUint64 { // rounding up near 2^64
			return n
		}
		return min(uint64(v), n)
	}
	for b := first; b <= end/bucket; b++ {
		c := cum((b+1)*bucket) - cum(b*bucket)
		c = satAdd(w.sum+counted, c) - (w.sum + counted) // saturate as add does
		w.b[b%size] += c
		w.counted(b, c)
		counted += c
	}
	w.sum += counted
	return counted
}

// addWeights slides the window to now and counts n accesses that happened
// over consecutive steps of event time, the i-th from first+i*step
// (nanoseconds since the epoch), in the proportions of weights (whose sum is
// total, > 0): each step gets its share of n, rounded so that the shares
// add up, and counts it as addTime does. It reports how many of the n it
// counted.
func (w *window) addWeights(now, first, step int64, weights []uint64, total uint64, bucket int64, n uint64) uint64 {
	var cum, placed, counted uint64
	for i, wt := range weights {
		if wt == 0 {
			continue
		}
		cum += wt
		hi, lo := bits.Mul64(n, cum)
		upto, _ := bits.Div64(hi, lo, total) // cum <= total, so it fits
		share := upto - placed
		placed = upto
		if share > 0 {
			from := first + int64(i)*step
			counted += w.addTime(now, from, from+step-1, bucket, share)
		}
	}
	return counted
}

// resize makes the window keep size buckets and evaluate n of them, keeping
// the counts of the buckets that are in both the old and the new ring (a
// longer window keeps what it held, a shorter one drops what is now outside
// it). The evaluated total is recomputed at the next evalTo.
func (w *window) resize(size, n int) {
	nb := make([]uint64, size)
	old, ns := int64(len(w.b)), int64(size)
	var sum uint64
	for i := max(w.last-old+1, w.last-ns+1); i <= w.last; i++ {
		c := w.b[i%old]
		nb[i%ns] = c
		sum += c
	}
	w.b, w.sum, w.n, w.eend, w.esum = nb, sum, int64(n), noEval, 0
}
