package wire

import "encoding/binary"

// partialMagic is the first byte of a partial-count batch. Like batchMagic it
// is a UTF-8 continuation byte, and it differs from batchMagic so that
// neither format can be mistaken for the other.
const partialMagic = 0xA6

// minGroupSize is the smallest encoded group: an empty app and no entries.
const minGroupSize = 2

// PartialBatch is what a detector sends an aggregator each flush tick: the
// counts it summed since the last flush, grouped by app.
type PartialBatch struct {
	Source string // sender id (the detector's member id)
	At     int64  // flush time, Unix milliseconds
	Groups []PartialGroup
}

// PartialGroup holds one app's (key, count) entries of a PartialBatch.
type PartialGroup struct {
	App     string
	Entries []KeyCount
}

// AppendPartials appends b as a partial-count batch (current version) to dst
// and returns the extended slice. Entries with a count of 0 or an empty key
// are left out, and so are groups left with no entries; key length is not
// limited (the detector's Decoder already enforced its MaxKeyLen). A
// negative At is written as 0. The layout is documented
// in docs/wire.md.
func AppendPartials(dst []byte, b *PartialBatch) []byte {
	groups := 0
	for _, g := range b.Groups {
		if countPartials(g.Entries) > 0 {
			groups++
		}
	}
	dst = append(dst, partialMagic, batchVersion)
	dst = binary.AppendUvarint(dst, uint64(len(b.Source)))
	dst = append(dst, b.Source...)
	dst = binary.AppendUvarint(dst, uint64(max(b.At, 0)))
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
				dst = binary.AppendUvarint(dst, e.Count)
			}
		}
	}
	return dst
}

func validPartial(e KeyCount) bool { return e.Count > 0 && len(e.Key) > 0 }

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
// called. app and key alias body. Keys are 1 or more bytes and counts >= 1;
// lengths are bounded only by the body, so callers should limit its size
// (http.MaxBytesReader). The same key may appear more than once: the counts
// add up. err is nil or an *Error.
func DecodePartials(body []byte, fn func(app, key []byte, count uint64)) (source string, at int64, err error) {
	src, at, groups, start, f := checkPartials(body)
	if f.r != 0 {
		return "", 0, f.err(1)
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
			i = j
			fn(app, key, c)
		}
	}
	return string(src), at, nil
}

func checkPartials(b []byte) (src []byte, at int64, groups, start int, f fail) {
	if f = checkVersion(b, partialMagic, "partial-count batch"); f.r != 0 {
		return
	}
	var l, i int
	if l, i, f = readLen(b, 2, "source"); f.r != 0 {
		return
	}
	src = b[i : i+l]
	if at, i, f = readTime(b, i+l); f.r != 0 {
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
		var n int
		if n, i, f = readCount(b, i+l, minEntrySize, "entry"); f.r != 0 {
			return
		}
		if i, f = checkEntries(b, i, n, 0); f.r != 0 {
			return
		}
	}
	if i != len(b) {
		f = fail{ReasonTrailingData, i, "bytes after the last group"}
	}
	return
}
