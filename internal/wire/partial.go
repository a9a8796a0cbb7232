package wire

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// partialMagic is the first byte of a partial-count batch. Like batchMagic it
// is a UTF-8 continuation byte, and it differs from batchMagic so that
// neither format can be mistaken for the other.
const partialMagic = 0xA6

// partialVersion is the version of the partial-count batch that
// AppendPartials writes. Version 1 had no Span, version 2 no End and Seq,
// versions 1 to 3 carry counts only (all reads, no bytes), and versions 1
// to 4 no Step and Weights; DecodePartials reads all five.
const partialVersion = 5

// MaxWeights is the most Weights a partial-count batch carries.
const MaxWeights = 1024

// maxPartialCount is the largest count a version 4 or 5 entry holds: the count
// is written shifted left by one, its low bit saying whether writes and
// bytes follow. Larger counts are written as this, and it reads back as
// 2^64-1: a count saturated on the way stays saturated.
const maxPartialCount = math.MaxInt64

// minGroupSize is the smallest encoded group: an empty app and no entries.
const minGroupSize = 2

// PartialBatch is what a detector sends an aggregator each flush tick: the
// counts it summed since the last flush, grouped by app.
type PartialBatch struct {
	Source string // sender id (the detector's member id)
	At     int64  // flush time, Unix milliseconds
	// Span is how much event time the counts cover, in milliseconds: about
	// one flush interval normally, more when the detector caught up on a
	// backlog. 0 means unknown (treated as one flush).
	Span int64
	// End is the event time of the newest counted access, Unix
	// milliseconds: the counts happened over [End-Span, End]. 0 means
	// unknown (the receiver counts them as ending at receipt).
	End int64
	// Seq numbers the sender's flushes; a retry of the same counts to the
	// same receiver carries the same (Source, Seq), so the receiver can
	// apply each batch once. 0 means unnumbered: never deduplicated.
	Seq uint64
	// Step and Weights say how the batch's accesses spread over its event
	// time, when End is known: Weights[i] of them happened in
	// [(s+i)*Step, (s+i+1)*Step) Unix milliseconds, s = (End-Span)/Step.
	// Step 0 or no Weights means unknown (the receiver spreads the counts
	// evenly over [End-Span, End]). At most MaxWeights are written.
	Step    int64
	Weights []uint64
	Groups  []PartialGroup
}

// PartialHeader is the header of a decoded partial-count batch.
type PartialHeader struct {
	Source string
	At     int64  // Unix milliseconds
	Span   int64  // milliseconds; 0 in version 1 batches
	End    int64  // Unix milliseconds; 0 in version 1 and 2 batches
	Seq    uint64 // 0 in version 1 and 2 batches
	// Step (milliseconds) and Weights as in PartialBatch; 0 and nil in
	// version 1 to 4 batches.
	Step    int64
	Weights []uint64
}

// PartialGroup holds one app's entries of a PartialBatch: each key's
// accesses, the writes among them and their bytes.
type PartialGroup struct {
	App     string
	Entries []KeyCount
}

// AppendPartials appends b as a partial-count batch (current version) to dst
// and returns the extended slice. Entries with a count of 0, an empty key or
// a key that is not UTF-8 are left out, and so are groups left with no
// entries; key length is not limited (the detector's Decoder already
// enforced its MaxKeyLen). A count above 2^63-1 is written as 2^63-1,
// Writes above the count as the count and WriteBytes above Bytes as Bytes.
// A negative At, Span, End or Step is written as 0, and Weights only with a
// positive Step, at most MaxWeights of them. The layout is documented in
// docs/wire.md.
func AppendPartials(dst []byte, b *PartialBatch) []byte {
	groups := 0
	for _, g := range b.Groups {
		if countPartials(g.Entries) > 0 {
			groups++
		}
	}
	dst = append(dst, partialMagic, partialVersion)
	dst = binary.AppendUvarint(dst, uint64(len(b.Source)))
	dst = append(dst, b.Source...)
	dst = binary.AppendUvarint(dst, uint64(max(b.At, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(b.Span, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(b.End, 0)))
	dst = binary.AppendUvarint(dst, b.Seq)
	if ws := b.Weights[:min(len(b.Weights), MaxWeights)]; b.Step > 0 && len(ws) > 0 {
		dst = binary.AppendUvarint(dst, uint64(b.Step))
		dst = binary.AppendUvarint(dst, uint64(len(ws)))
		for _, w := range ws {
			dst = binary.AppendUvarint(dst, w)
		}
	} else {
		dst = binary.AppendUvarint(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(groups))
	for _, g := range b.Groups {
		n := countPartials(g.Entries)
		if n == 0 {
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(g.App)))
		dst = append(dst, g.App...)
		dst = binary.AppendUvarint(dst, uint64(n))
		for _, e := range g.Entries {
			if validPartial(e) {
				dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
				dst = append(dst, e.Key...)
				dst = appendPartialCounts(dst, &e)
			}
		}
	}
	return dst
}

// appendPartialCounts writes a version 4 or 5 entry's counts: count<<1, its low
// bit set when writes, bytes and write bytes follow. A read-only entry
// without bytes (the common one) costs what version 3 cost, but for counts
// of 64..127 (and the like at each 7-bit boundary), which take a byte more.
func appendPartialCounts(dst []byte, e *KeyCount) []byte {
	c := min(e.Count, maxPartialCount)
	if e.Writes == 0 && e.Bytes == 0 {
		return binary.AppendUvarint(dst, c<<1)
	}
	dst = binary.AppendUvarint(dst, c<<1|1)
	dst = binary.AppendUvarint(dst, min(e.Writes, c))
	dst = binary.AppendUvarint(dst, e.Bytes)
	return binary.AppendUvarint(dst, min(e.WriteBytes, e.Bytes))
}

func validPartial(e KeyCount) bool { return e.Count > 0 && len(e.Key) > 0 && utf8.ValidString(e.Key) }

func countPartials(entries []KeyCount) int {
	n := 0
	for _, e := range entries {
		if validPartial(e) {
			n++
		}
	}
	return n
}

// DecodePartials decodes a partial-count batch. It validates the whole body
// first and then calls fn for each entry in order; on error fn is never
// called. app and key alias body. For each entry fn gets the accesses n
// (reads and writes, >= 1), the writes among them (<= n), the bytes of
// their values and the bytes written (<= bytes; 0 and 0 when the sender did
// not know). Versions 1 to 3 carry counts only: their entries are reads
// without bytes (writes, bytes and writeBytes 0). Keys are 1 or more bytes;
// lengths are bounded only by the body, so callers should limit its size
// (http.MaxBytesReader). The same key may appear more than once: the
// counts add up. err is nil or an *Error. Versions 1 to 5 are read.
func DecodePartials(body []byte, fn func(app, key []byte, n, writes, bytes, writeBytes uint64)) (PartialHeader, error) {
	src, h, version, groups, start, f := checkPartials(body)
	if f.r != 0 {
		return PartialHeader{}, f.err(1)
	}
	i := start
	for ; groups > 0; groups-- {
		l, j := trustedUvarint(body, i)
		app := body[j : j+int(l) : j+int(l)]
		n, j := trustedUvarint(body, j+int(l))
		i = j
		for ; n > 0; n-- {
			l, j := trustedUvarint(body, i)
			key := body[j : j+int(l) : j+int(l)]
			c, j := trustedUvarint(body, j+int(l))
			var w, b, wb uint64
			if version >= 4 {
				more := c&1 != 0
				if c >>= 1; c == maxPartialCount {
					c = math.MaxUint64
				}
				if more {
					w, j = trustedUvarint(body, j)
					b, j = trustedUvarint(body, j)
					wb, j = trustedUvarint(body, j)
				}
			}
			i = j
			fn(app, key, c, w, b, wb)
		}
	}
	h.Source = string(src)
	return h, nil
}

// ReadPartialHeader reads only the header of a partial-count batch, so that a
// receiver can act on it before DecodePartials delivers the entries. It does
// not validate the rest of the body.
func ReadPartialHeader(body []byte) (PartialHeader, error) {
	src, h, _, _, f := partialHeader(body)
	if f.r != 0 {
		return PartialHeader{}, f.err(1)
	}
	h.Source = string(src)
	return h, nil
}

func checkPartials(b []byte) (src []byte, h PartialHeader, version byte, groups, start int, f fail) {
	var i, l int
	if src, h, version, i, f = partialHeader(b); f.r != 0 {
		return
	}
	if groups, i, f = readCount(b, i, minGroupSize, "group"); f.r != 0 {
		return
	}
	start = i
	for g := groups; g > 0; g-- {
		if l, i, f = readLen(b, i, "app"); f.r != 0 {
			return
		}
		if !utf8.Valid(b[i : i+l]) {
			f = fail{ReasonBadUTF8, i, "app is not valid UTF-8"}
			return
		}
		var n int
		if n, i, f = readCount(b, i+l, minEntrySize, "entry"); f.r != 0 {
			return
		}
		check := checkEntries
		if version >= 4 {
			check = checkPartialEntries
		}
		if i, f = check(b, i, n, 0); f.r != 0 {
			return
		}
	}
	if i != len(b) {
		f = fail{ReasonTrailingData, i, "bytes after the last group"}
	}
	return
}

// checkPartialEntries validates n version 4 or 5 entries starting at b[i] and
// returns the index after them: key length, key, count<<1|more and, when
// more is set, writes (<= count), bytes and write bytes (<= bytes).
func checkPartialEntries(b []byte, i, n, _ int) (int, fail) {
	for ; n > 0; n-- {
		l, j, f := readLen(b, i, "key")
		switch {
		case f.r != 0:
			return i, f
		case l == 0:
			return i, fail{ReasonEmptyKey, i, "empty key"}
		case !utf8.Valid(b[j : j+l]):
			return i, fail{ReasonBadUTF8, i, "key is not valid UTF-8"}
		}
		i = j + l
		c, j, f := readUvarint(b, i)
		if f.r != 0 {
			return i, f
		}
		if c>>1 == 0 {
			return i, fail{ReasonBadCount, i, "count 0"}
		}
		if c&1 != 0 {
			var w, by, wb uint64
			k := j
			if w, j, f = readUvarint(b, j); f.r != 0 {
				return j, f
			}
			if w > c>>1 {
				return k, fail{ReasonBadValue, k, "more writes than accesses"}
			}
			if by, j, f = readUvarint(b, j); f.r != 0 {
				return j, f
			}
			k = j
			if wb, j, f = readUvarint(b, j); f.r != 0 {
				return j, f
			}
			if wb > by {
				return k, fail{ReasonBadValue, k, "more bytes written than bytes"}
			}
		}
		i = j
	}
	return i, fail{}
}

// partialHeader reads the magic, version, source, time, (version 2 on)
// span, (version 3 on) end and sequence and (version 5 on) step and
// weights of a partial-count batch and returns the version and the index
// after them.
func partialHeader(b []byte) (src []byte, h PartialHeader, version byte, i int, f fail) {
	version = byte(partialVersion)
	if len(b) >= 2 && b[0] == partialMagic && b[1] >= 1 && b[1] < partialVersion {
		version = b[1]
	}
	if f = checkVersionOf(b, partialMagic, version, "partial-count batch"); f.r != 0 {
		return
	}
	var l int
	if l, i, f = readLen(b, 2, "source"); f.r != 0 {
		return
	}
	src = b[i : i+l]
	if !utf8.Valid(src) {
		f = fail{ReasonBadUTF8, i, "source is not valid UTF-8"}
		return
	}
	if h.At, i, f = readTime(b, i+l); f.r != 0 {
		return
	}
	if version >= 2 {
		if h.Span, i, f = readTime(b, i); f.r != 0 {
			return
		}
	}
	if version >= 3 {
		if h.End, i, f = readTime(b, i); f.r != 0 {
			return
		}
		if h.Seq, i, f = readUvarint(b, i); f.r != 0 {
			return
		}
	}
	if version >= 5 {
		if h.Step, i, f = readTime(b, i); f.r != 0 || h.Step == 0 {
			return
		}
		var n int
		if n, i, f = readCount(b, i, 1, "weight"); f.r != 0 {
			return
		}
		switch {
		case n > MaxWeights:
			f = fail{ReasonBadValue, i, "more than " + itoa(MaxWeights) + " weights"}
			return
		case n == 0: // as written without weights
			h.Step = 0
			return
		}
		h.Weights = make([]uint64, n)
		for k := range h.Weights {
			if h.Weights[k], i, f = readUvarint(b, i); f.r != 0 {
				return
			}
		}
	}
	return
}
