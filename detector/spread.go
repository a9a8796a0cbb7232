package detector

import "github.com/hotspot-dev/hotspot/internal/wire"

// spread counts a round's accesses per step of event time, so that the
// aggregators place the round's counts where they happened (shardapi.Flush's
// Weights) rather than evenly over its span: a round that catches up on a
// backlog holds a few records far apart in time, and other partitions'
// records between them were counted in earlier rounds. Each worker keeps
// one per round and the flusher merges them.
type spread struct {
	step  int64    // milliseconds, > 0
	first int64    // the step (event time / step) of w[0]
	w     []uint64 // accesses per step from first on
	over  bool     // the round spans more than wire.MaxWeights steps: no weights

	lastMs int64 // the time last added (0: none), whose weight is w[lastI]: a record's entries mostly share one
	lastI  int
}

func (s *spread) reset() {
	s.w, s.over, s.lastMs = s.w[:0], false, 0
}

// add counts n accesses at event time ms (Unix milliseconds, > 0).
func (s *spread) add(ms int64, n uint64) {
	if ms == s.lastMs {
		s.w[s.lastI] = satAdd(s.w[s.lastI], n)
		return
	}
	s.lastMs = 0
	if i, ok := s.addAt(ms/s.step, n); ok {
		s.lastMs, s.lastI = ms, i
	}
}

// addAt counts n accesses in step at and returns their weight's index.
func (s *spread) addAt(at int64, n uint64) (int, bool) {
	switch {
	case s.over:
		return 0, false
	case len(s.w) == 0:
		s.first = at
	case at < s.first:
		if !s.fits(s.first + int64(len(s.w)) - at) {
			return 0, false
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
			return 0, false
		}
		s.w = append(s.w, make([]uint64, i+1-len(s.w))...)
	}
	s.w[i] = satAdd(s.w[i], n)
	return i, true
}

func (s *spread) fits(steps int64) bool {
	if steps > wire.MaxWeights {
		s.over = true
	}
	return !s.over
}

// merge adds o's counts to s (the same step).
func (s *spread) merge(o *spread) {
	if o.over {
		s.over = true
	}
	for i, n := range o.w {
		if n > 0 {
			s.addAt(o.first+int64(i), n)
		}
	}
}

// weights returns the accesses per step from the step of the round's
// oldest event time, or nil when there are none to send.
func (s *spread) weights() []uint64 {
	if s.over || len(s.w) == 0 {
		return nil
	}
	return s.w
}

// sum returns the accesses of every step.
func (s *spread) sum() uint64 {
	var n uint64
	for _, w := range s.w {
		n = satAdd(n, w)
	}
	return n
}
