package detector

import (
	"hash/maphash"
	"math"
	"math/bits"
)

const sketchDepth = 4

// sketch is a count-min sketch with conservative update over two
// generations: the counts since the last rotation and the ones before. An
// estimate sums both, so it never under-counts a key's accesses over the
// last rotation period (and may include up to one more period).
type sketch struct {
	width     uint32
	cur, prev []uint32 // sketchDepth rows of width counters each
	curN      uint64   // accesses added to cur
	prevN     uint64   // accesses added to prev
	seed      maphash.Seed
}

// newSketch sizes the sketch for a table of maxKeys keys: width is the power
// of two at or above maxKeys/2, at least 1024 and at most 2^22, so it costs
// 2*4*4 = 32 bytes per counter column.
func newSketch(maxKeys int) *sketch {
	w := uint32(1) << bits.Len32(uint32(max(min(maxKeys/2, 1<<22), 1024)-1))
	return &sketch{
		width: w,
		cur:   make([]uint32, sketchDepth*int(w)),
		prev:  make([]uint32, sketchDepth*int(w)),
		seed:  maphash.MakeSeed(),
	}
}

// add counts n accesses of k and returns the estimate of k's accesses over
// both generations, this one included.
func (s *sketch) add(k []byte, n uint64) uint64 {
	s.curN = satAdd(s.curN, n)
	h := maphash.Bytes(s.seed, k)
	h1, h2 := uint32(h), uint32(h>>32)|1
	var at [sketchDepth]uint32
	low := uint32(math.MaxUint32)
	for i := range at {
		at[i] = uint32(i)*s.width + (h1+uint32(i)*h2)&(s.width-1)
		low = min(low, s.cur[at[i]])
	}
	// Conservative update: raise each counter only to the new lower bound.
	v := satAdd32(low, n)
	est := uint64(math.MaxUint64)
	for _, j := range at {
		if s.cur[j] < v {
			s.cur[j] = v
		}
		est = min(est, uint64(s.cur[j])+uint64(s.prev[j]))
	}
	return est
}

// floor is the mean counter value of a row: the accesses of other keys that
// an estimate includes on average. Estimates below it are mostly collisions.
func (s *sketch) floor() uint64 { return satAdd(s.curN, s.prevN) / uint64(s.width) }

// rotate starts a new generation and forgets the oldest one.
func (s *sketch) rotate() {
	s.cur, s.prev = s.prev, s.cur
	s.prevN, s.curN = s.curN, 0
	clear(s.cur)
}
