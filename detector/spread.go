package detector

import (
	"math/bits"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// spread counts a round's accesses per step of event time, so that the
// aggregators place the round's counts where they happened (api.Flush's
// Weights) rather than evenly over its span: a round that catches up on a
// backlog holds a few records far apart in time, and other partitions'
// records between them were counted in earlier rounds. Each worker keeps
// one per round and the flusher merges them.
//
// A time stands for the step after it: producers stamp a batch with the
// start of the interval they summed (the SDK and the load generator sum
// 100 ms, the default step), so the accesses stamped ms go to the two steps
// that [ms, ms+step) overlaps, in proportion. Stamped at a step's start they
// all go to that step.
type spread struct {
	step  int64    // milliseconds, > 0
	first int64    // the step (event time / step) of w[0]
	w     []uint64 // accesses per step from first on
	over  bool     // the round spans more than wire.MaxWeights steps: no weights

	// Accesses not yet added, all stamped pendMs: a record's entries
	// mostly share one time, which is split once.
	pendMs int64
	pend   uint64
}

func (s *spread) reset() {
	s.w, s.over, s.pendMs, s.pend = s.w[:0], false, 0, 0
}

// add counts n accesses stamped ms (Unix milliseconds, > 0).
func (s *spread) add(ms int64, n uint64) {
	if ms != s.pendMs {
		s.settle()
		s.pendMs = ms
	}
	s.pend = satAdd(s.pend, n)
}

// settle adds the pending accesses to the steps.
func (s *spread) settle() {
	if s.pend == 0 {
		return
	}
	at, r := s.pendMs/s.step, s.pendMs%s.step
	hi, lo := bits.Mul64(s.pend, uint64(s.step-r))
	in, _ := bits.Div64(hi, lo, uint64(s.step)) // the share in step at: s.step-r <= s.step, so it fits
	s.addAt(at, in)                             // even 0: the weights start at the oldest time's step
	if in < s.pend {
		s.addAt(at+1, s.pend-in)
	}
	s.pend = 0
}

// addAt counts n accesses in step at.
func (s *spread) addAt(at int64, n uint64) {
	switch {
	case s.over:
		return
	case len(s.w) == 0:
		s.first = at
	case at < s.first:
		if !s.fits(s.first + int64(len(s.w)) - at) {
			return
		}
		grow := int(s.first - at)
		s.w = append(s.w, make([]uint64, grow)...)
		copy(s.w[grow:], s.w)
		clear(s.w[:grow])
		s.first = at
	}
	i := int(at - s.first)
	if i >= len(s.w) {
		if !s.fits(int64(i) + 1) {
			return
		}
		s.w = append(s.w, make([]uint64, i+1-len(s.w))...)
	}
	s.w[i] = satAdd(s.w[i], n)
}

func (s *spread) fits(steps int64) bool {
	if steps > wire.MaxWeights {
		s.over = true
	}
	return !s.over
}

// merge adds o's counts, which it settled, to s (the same step).
func (s *spread) merge(o *spread) {
	if o.over {
		s.over = true
	}
	for i, n := range o.w {
		s.addAt(o.first+int64(i), n)
	}
}

// weights settles s and returns its accesses per step from the step of
// the round's oldest event time, or nil when there are none to send.
func (s *spread) weights() []uint64 {
	s.settle()
	if s.over || len(s.w) == 0 {
		return nil
	}
	return s.w
}
