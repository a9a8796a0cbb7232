package detector

import (
	"math"
	"math/bits"
)

const (
	sketchDepth = 4 // counters per key and generation
	sketchSlots = 8 // counters per block and generation; a key uses sketchDepth of them
)

// sketch is a count-min sketch with conservative update over two
// generations: the counts since the last rotation and the ones before. An
// estimate sums both, so it never under-counts a key's accesses over the
// last rotation period (and may include up to one more period).
//
// It is blocked: a key's counters of both generations lie in one 64-byte
// block (sketchSlots of each generation), picked by the key's hash, and the
// key uses sketchDepth distinct slots of it. An update then touches one
// cache line instead of one per row and generation, which is what the
// sketch cost in a table flooded with one-off keys (2M events/s of them).
// The block holds twice the keys a row's column would, each on half the
// slots, so the mean counter, the noise floor, is what it was.
type sketch struct {
	blocks uint32   // a power of two
	cells  []uint32 // per block: the slots of generation 0, then of generation 1
	cur    int      // the generation counting now: 0 or 1
	curN   uint64   // accesses added to the current generation
	prevN  uint64   // accesses added to the previous one
}

// newSketch sizes the sketch for a table of maxKeys keys: width is the power
// of two at or above maxKeys/2, at least 1024 and at most 2^22, and the
// sketch has sketchDepth*width counters per generation, 32 bytes per width.
func newSketch(maxKeys int) *sketch {
	w := uint32(1) << bits.Len32(uint32(max(min(maxKeys/2, 1<<22), 1024)-1))
	b := w * sketchDepth / sketchSlots
	return &sketch{blocks: b, cells: make([]uint32, int(b)*2*sketchSlots)}
}

// add counts n accesses of the key whose 64-bit hash is h (the counter's
// own, from a seeded maphash) and returns the estimate of its accesses over
// both generations, this one included.
func (s *sketch) add(h, n uint64) uint64 {
	s.curN = satAdd(s.curN, n)
	blk := s.block(h)
	cur, prev := blk[s.cur*sketchSlots:][:sketchSlots], blk[(1-s.cur)*sketchSlots:][:sketchSlots]
	// Slots first, first+step, ... modulo sketchSlots: an odd step makes
	// the sketchDepth of them distinct.
	first, step := uint32(h>>32), uint32(h>>35)<<1|1
	var at [sketchDepth]uint32
	low := uint32(math.MaxUint32)
	for i := range at {
		at[i] = (first + uint32(i)*step) % sketchSlots
		low = min(low, cur[at[i]])
	}
	// Conservative update: raise each counter only to the new lower bound.
	v := satAdd32(low, n)
	est := uint64(math.MaxUint64)
	for _, j := range at {
		if cur[j] < v {
			cur[j] = v
		}
		est = min(est, uint64(cur[j])+uint64(prev[j]))
	}
	return est
}

// block is the 64-byte block of the key whose hash is h.
func (s *sketch) block(h uint64) []uint32 {
	return s.cells[int(uint32(h)&(s.blocks-1))*2*sketchSlots:][:2*sketchSlots]
}

// floor is the mean counter value: the accesses of other keys that an
// estimate includes on average. Estimates below it are mostly collisions.
// Each access raises at most sketchDepth of a generation's
// blocks*sketchSlots counters.
func (s *sketch) floor() uint64 {
	return satAdd(s.curN, s.prevN) / (uint64(s.blocks) * sketchSlots / sketchDepth)
}

// rotate starts a new generation and forgets the oldest one.
func (s *sketch) rotate() {
	s.cur = 1 - s.cur
	s.prevN, s.curN = s.curN, 0
	for i := s.cur * sketchSlots; i < len(s.cells); i += 2 * sketchSlots {
		clear(s.cells[i : i+sketchSlots])
	}
}
