package aggregator

// window counts accesses in a ring of fixed-size buckets. Bucket indexes are
// absolute (time since the Unix epoch divided by the bucket size), so every
// window of a process shares one alignment: the receipt clock.
//
// Invariant: sum is the total of b, and b holds exactly the buckets
// (last-len(b), last]; older counts have been subtracted.
type window struct {
	b    []uint64
	sum  uint64
	last int64 // absolute index of the newest bucket in b
}

func newWindow(n int, now int64) window {
	return window{b: make([]uint64, n), last: now}
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
		w.sum = 0
	} else {
		for i := w.last + 1; i <= now; i++ {
			s := &w.b[i%n]
			w.sum -= *s
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
		counted += c
	}
	w.sum += counted
	return counted
}
