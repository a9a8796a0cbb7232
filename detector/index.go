package detector

// index maps a composite key to its entries index. It is an open-addressing
// table with linear probing over an array of 8-byte slots, each holding the
// high 32 bits of the key's 64-bit hash (its tag, whose low bits are also
// its home slot) and the entries index plus one (0 marks an empty slot).
// Compared with a Go map keyed by strings, a lookup reads one small slot
// array that mostly stays in cache instead of a control word, a slot and
// the key's string header, and a delete is a backward shift with no
// tombstone. Keys are compared in full on a tag match, so it is exact.
type index struct {
	slots []uint64
	mask  uint32
	n     int // keys held
}

const indexMinSlots = 1024

func (x *index) len() int { return x.n }

// find returns the entries index of the key k of hash h, or false.
func (x *index) find(entries []entry, k []byte, h uint64) (uint32, bool) {
	if x.slots == nil {
		return 0, false
	}
	tag := uint32(h >> 32)
	for i := tag & x.mask; ; i = (i + 1) & x.mask {
		s := x.slots[i]
		if s == 0 {
			return 0, false
		}
		if uint32(s>>32) == tag {
			idx := uint32(s) - 1
			if entries[idx].key == string(k) {
				return idx, true
			}
		}
	}
}

// insert adds entries index idx under hash h; the key must not be present.
func (x *index) insert(h uint64, idx uint32, entries []entry) {
	if 2*(x.n+1) > len(x.slots) {
		x.grow(entries)
	}
	x.put(h, idx)
	x.n++
}

func (x *index) put(h uint64, idx uint32) {
	tag := uint32(h >> 32)
	i := tag & x.mask
	for x.slots[i] != 0 {
		i = (i + 1) & x.mask
	}
	x.slots[i] = uint64(tag)<<32 | uint64(idx+1)
}

// grow doubles the slot array (load stays at most 1/2) and re-inserts the
// live entries, whose hashes they hold.
func (x *index) grow(entries []entry) {
	n := max(2*len(x.slots), indexMinSlots)
	old := x.slots
	x.slots = make([]uint64, n)
	x.mask = uint32(n - 1)
	for _, s := range old {
		if s != 0 {
			idx := uint32(s) - 1
			x.put(entries[idx].hash, idx)
		}
	}
}

// remove deletes entries index idx of hash h, shifting back the slots of
// its probe run so that no lookup stops early.
func (x *index) remove(h uint64, idx uint32) {
	want := uint64(idx + 1)
	i := uint32(h>>32) & x.mask
	for uint32(x.slots[i]) != uint32(want) {
		i = (i + 1) & x.mask
	}
	for j := (i + 1) & x.mask; x.slots[j] != 0; j = (j + 1) & x.mask {
		home := uint32(x.slots[j]>>32) & x.mask
		// Move slot j back to i unless its home lies cyclically in (i, j].
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = 0
	x.n--
}
