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

// partialVersion is the newest version of the partial-count batch, which
// AppendPartials writes when the batch has a Reach, version 8 when it has
// instances, version 7 when it has sources or effects but neither, and
// version 5 otherwise (so that a shard not yet upgraded still takes the
// counts). Version 1 had no Span, version 2 no End and Seq, versions 1 to 3
// carry counts only (all reads, no bytes), versions 1 to 4 no Step and
// Weights, versions 1 to 5 no sources and effects, version 6 no sources'
// Total, versions 1 to 7 no instances and versions 1 to 8 no Reach;
// DecodePartials reads all nine.
const partialVersion = 9

// MaxTopSources is the most sources a partial-count batch carries for one
// key; MaxSketchLen the longest sketch of its distinct sources.
const (
	MaxTopSources = 16
	MaxSketchLen  = 1 << 16
)

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
	// Reach (version 9 on), Unix milliseconds, is set when the sender has
	// not read every access up to End yet: it has read all of them up to
	// Reach only (one of its partitions stopped getting records, and those
	// are late). 0 means End, or none when End is 0.
	Reach int64
	// Step and Weights say how the batch's accesses spread over its event
	// time, when End is known: Weights[i] of them happened in
	// [(s+i)*Step, (s+i+1)*Step) Unix milliseconds, s = (End-Span)/Step.
	// Step 0 or no Weights means unknown (the receiver spreads the counts
	// evenly over [End-Span, End]). At most MaxWeights are written.
	Step    int64
	Weights []uint64
	Groups  []PartialGroup
	// Sources and Effects (version 6 on) say, for some keys (those near
	// the threshold), who made their accesses, and what the apps' caches
	// did with their reads since the previous flush.
	Sources []PartialSources
	Effects []PartialEffect
	// Instances (version 8 on) are the same effects summed per app
	// instance instead of per key.
	Instances []PartialInstance
}

// SourceCount is one source of a key's accesses and how many of them it
// made.
type SourceCount struct {
	Src string
	N   uint64
}

// PartialSources is what a detector saw of one key's sources over some
// rounds: the key's accesses in them (Total, with a source or without),
// the busiest sources (at most MaxTopSources, busiest first) and an opaque
// sketch of all the distinct ones (a serialized HyperLogLog; at most
// MaxSketchLen bytes, nil for none).
type PartialSources struct {
	App, Key string
	Total    uint64
	Top      []SourceCount
	Distinct []byte
}

// PartialEffect is what the apps' caches reported doing with one key's
// reads since the detector's previous flush.
type PartialEffect struct {
	App, Key string
	EffectCounts
}

// PartialInstance is what one instance (Src) of App reported doing with
// the reads of all its hot keys since the detector's previous flush.
type PartialInstance struct {
	App, Src string
	EffectCounts
}

// PartialExtras receives the sources, effects and instances of a version 6
// to 8 batch (see DecodePartialsWith). A nil field skips them. The byte
// slices alias the body; top is the decoder's and valid only during the
// call. total is 0 in a version 6 batch, which had none.
type PartialExtras struct {
	Sources  func(app, key []byte, total uint64, top []SourceCount, distinct []byte)
	Effect   func(app, key []byte, c EffectCounts)
	Instance func(app, src []byte, c EffectCounts)
}

// PartialHeader is the header of a decoded partial-count batch.
type PartialHeader struct {
	Source string
	At     int64  // Unix milliseconds
	Span   int64  // milliseconds; 0 in version 1 batches
	End    int64  // Unix milliseconds; 0 in version 1 and 2 batches
	Seq    uint64 // 0 in version 1 and 2 batches
	Reach  int64  // Unix milliseconds; 0 in version 1 to 8 batches
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
	version := byte(5)
	switch {
	case b.Reach > 0:
		version = partialVersion
	case len(b.Instances) > 0:
		version = 8
	case len(b.Sources) > 0 || len(b.Effects) > 0:
		version = 7
	}
	dst = append(dst, partialMagic, version)
	dst = binary.AppendUvarint(dst, uint64(len(b.Source)))
	dst = append(dst, b.Source...)
	dst = binary.AppendUvarint(dst, uint64(max(b.At, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(b.Span, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(b.End, 0)))
	dst = binary.AppendUvarint(dst, b.Seq)
	if version >= 9 {
		dst = binary.AppendUvarint(dst, uint64(b.Reach))
	}
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
	if version >= 7 {
		dst = appendPartialExtras(dst, b, version)
	}
	return dst
}

// appendPartialExtras writes version 7's sources and effects sections, and
// version 8's instances after them. Entries with an empty or invalid key
// are left out, sources beyond MaxTopSources, sources with an empty name or
// a count of 0, sketches longer than MaxSketchLen, and instances with an
// empty or invalid name.
func appendPartialExtras(dst []byte, b *PartialBatch, version byte) []byte {
	n := 0
	for i := range b.Sources {
		if validPartialKey(b.Sources[i].Key) {
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range b.Sources {
		s := &b.Sources[i]
		if !validPartialKey(s.Key) {
			continue
		}
		dst = appendString(dst, s.App)
		dst = appendString(dst, s.Key)
		dst = binary.AppendUvarint(dst, s.Total)
		top := 0
		for _, sc := range s.Top[:min(len(s.Top), MaxTopSources)] {
			if sc.Src != "" && sc.N > 0 && utf8.ValidString(sc.Src) {
				top++
			}
		}
		dst = binary.AppendUvarint(dst, uint64(top))
		for _, sc := range s.Top[:min(len(s.Top), MaxTopSources)] {
			if sc.Src != "" && sc.N > 0 && utf8.ValidString(sc.Src) {
				dst = appendString(dst, sc.Src)
				dst = binary.AppendUvarint(dst, sc.N)
			}
		}
		if len(s.Distinct) > MaxSketchLen {
			dst = binary.AppendUvarint(dst, 0)
		} else {
			dst = binary.AppendUvarint(dst, uint64(len(s.Distinct)))
			dst = append(dst, s.Distinct...)
		}
	}
	dst = appendEffectSection(dst, len(b.Effects), func(i int) (string, string, *EffectCounts) {
		e := &b.Effects[i]
		return e.App, e.Key, &e.EffectCounts
	})
	if version < 8 {
		return dst
	}
	return appendEffectSection(dst, len(b.Instances), func(i int) (string, string, *EffectCounts) {
		in := &b.Instances[i]
		return in.App, in.Src, &in.EffectCounts
	})
}

// appendEffectSection writes a section of n entries, each an app, a name (a
// key, or an instance's) and four counts, as entry(i) gives them; those
// whose name is empty or invalid are left out.
func appendEffectSection(dst []byte, n int, entry func(i int) (app, name string, c *EffectCounts)) []byte {
	valid := 0
	for i := range n {
		if _, name, _ := entry(i); validPartialKey(name) {
			valid++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(valid))
	for i := range n {
		app, name, c := entry(i)
		if !validPartialKey(name) {
			continue
		}
		dst = appendString(dst, app)
		dst = appendString(dst, name)
		dst = appendEffectCounts(dst, c)
	}
	return dst
}

func appendEffectCounts(dst []byte, c *EffectCounts) []byte {
	dst = binary.AppendUvarint(dst, c.L1Hits)
	dst = binary.AppendUvarint(dst, c.L2Reads)
	dst = binary.AppendUvarint(dst, c.SourceLoads)
	return binary.AppendUvarint(dst, c.Limited)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func validPartialKey(k string) bool { return len(k) > 0 && utf8.ValidString(k) }

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

func validPartial(e KeyCount) bool { return e.Count > 0 && validPartialKey(e.Key) }

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
// counts add up. err is nil or an *Error. Versions 1 to 7 are read; the
// sources and effects of versions 6 and 7 are validated and skipped (see
// DecodePartialsWith).
func DecodePartials(body []byte, fn func(app, key []byte, n, writes, bytes, writeBytes uint64)) (PartialHeader, error) {
	return DecodePartialsWith(body, fn, PartialExtras{})
}

// DecodePartialsWith is DecodePartials, and then hands a version 6 to 8
// batch's sources, effects and instances to x, in order, once every count
// was delivered.
func DecodePartialsWith(body []byte, fn func(app, key []byte, n, writes, bytes, writeBytes uint64), x PartialExtras) (PartialHeader, error) {
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
	if version >= 6 {
		deliverExtras(body, i, version, x)
	}
	h.Source = string(src)
	return h, nil
}

// deliverExtras hands the checked sources, effects and (version 8)
// instances sections at body[i] of a batch of the given version to x.
func deliverExtras(b []byte, i int, version byte, x PartialExtras) {
	str := func() []byte {
		l, j := trustedUvarint(b, i)
		i = j + int(l)
		return b[j:i:i]
	}
	var top []SourceCount
	n, i := trustedUvarint(b, i)
	for ; n > 0; n-- {
		app, key := str(), str()
		var total, t uint64
		if version >= 7 {
			total, i = trustedUvarint(b, i)
		}
		t, i = trustedUvarint(b, i)
		top = top[:0]
		for ; t > 0; t-- {
			src := str()
			var c uint64
			c, i = trustedUvarint(b, i)
			if x.Sources != nil {
				top = append(top, SourceCount{Src: string(src), N: c})
			}
		}
		distinct := str()
		if x.Sources != nil {
			x.Sources(app, key, total, top, distinct)
		}
	}
	counts := func() (c EffectCounts) {
		c.L1Hits, i = trustedUvarint(b, i)
		c.L2Reads, i = trustedUvarint(b, i)
		c.SourceLoads, i = trustedUvarint(b, i)
		c.Limited, i = trustedUvarint(b, i)
		return c
	}
	n, i = trustedUvarint(b, i)
	for ; n > 0; n-- {
		app, key := str(), str()
		c := counts()
		if x.Effect != nil {
			x.Effect(app, key, c)
		}
	}
	if version < 8 {
		return
	}
	n, i = trustedUvarint(b, i)
	for ; n > 0; n-- {
		app, src := str(), str()
		c := counts()
		if x.Instance != nil {
			x.Instance(app, src, c)
		}
	}
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
	if version >= 6 {
		if i, f = checkExtras(b, i, version); f.r != 0 {
			return
		}
	}
	if i != len(b) {
		f = fail{ReasonTrailingData, i, "bytes after the last group"}
	}
	return
}

// checkExtras validates the sources, effects and (version 8) instances
// sections of a version 6 to 8 batch at b[i] and returns the index after
// them.
func checkExtras(b []byte, i int, version byte) (int, fail) {
	// str checks a string of at most max bytes (0: any) that must be
	// valid UTF-8 (and not empty, when what names a key or a source).
	str := func(what string, max int, nonEmpty bool) fail {
		l, j, f := readLen(b, i, what)
		switch {
		case f.r != 0:
			return f
		case nonEmpty && l == 0:
			return fail{ReasonEmptyKey, i, "empty " + what}
		case max > 0 && l > max:
			return fail{ReasonBadValue, i, what + " longer than " + itoa(uint64(max)) + " bytes"}
		case what != "sketch" && !utf8.Valid(b[j:j+l]):
			return fail{ReasonBadUTF8, i, what + " is not valid UTF-8"}
		}
		i = j + l
		return fail{}
	}
	num := func() fail {
		var f fail
		_, i, f = readUvarint(b, i)
		return f
	}
	n, j, f := readCount(b, i, 4, "sources entry")
	if f.r != 0 {
		return i, f
	}
	for i = j; n > 0; n-- {
		if f = str("app", 0, false); f.r == 0 {
			f = str("key", 0, true)
		}
		if f.r == 0 && version >= 7 {
			f = num() // the key's total
		}
		if f.r != 0 {
			return i, f
		}
		var t int
		if t, j, f = readCount(b, i, 2, "source"); f.r != 0 {
			return i, f
		}
		if t > MaxTopSources {
			return i, fail{ReasonBadValue, i, "more than " + itoa(MaxTopSources) + " sources"}
		}
		for i = j; t > 0; t-- {
			if f = str("source", 0, true); f.r != 0 {
				return i, f
			}
			var c uint64
			if c, j, f = readUvarint(b, i); f.r != 0 {
				return i, f
			}
			if c == 0 {
				return i, fail{ReasonBadCount, i, "source count 0"}
			}
			i = j
		}
		if f = str("sketch", MaxSketchLen, false); f.r != 0 {
			return i, f
		}
	}
	// An effect entry and an instance entry: an app, a non-empty name (key
	// or source) and four counts, 7 bytes at least.
	entries := func(what, name string) fail {
		n, j, f := readCount(b, i, 7, what)
		if f.r != 0 {
			return f
		}
		for i = j; n > 0; n-- {
			if f = str("app", 0, false); f.r == 0 {
				f = str(name, 0, true)
			}
			for k := 0; k < 4 && f.r == 0; k++ {
				f = num()
			}
			if f.r != 0 {
				return f
			}
		}
		return fail{}
	}
	if f = entries("effect", "key"); f.r == 0 && version >= 8 {
		f = entries("instance", "source")
	}
	return i, f
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
	if version >= 9 {
		if h.Reach, i, f = readTime(b, i); f.r != 0 {
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
