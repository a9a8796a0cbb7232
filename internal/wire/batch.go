package wire

import (
	"encoding/binary"
	"unicode/utf8"
)

// The access batch's first bytes. 0xA5 is a UTF-8 continuation byte, so no
// JSON text or log line starts with it. Version 1 entries are (key, count),
// every access a read; version 2 entries add the op and the bytes; version
// 3 is version 2 with the batch's source in the header. Version 4 is the
// effect batch: the same header with a period, and per key what the
// caches did with its reads.
const (
	batchMagic    = 0xA5
	batchVersion  = 1
	batchVersion2 = 2
	batchVersion3 = 3
	effectVersion = 4
)

// minEntrySize is the smallest encoded version 1 entry: a one-byte length,
// a one-byte key and a one-byte count. minEntrySize2 adds a one-byte op and
// a one-byte bytes.
const (
	minEntrySize  = 3
	minEntrySize2 = 5
	minEffectSize = 6 // a key of one byte, four one-byte counts
)

// AppendBatch appends a version 1 access batch for app to dst and returns
// the extended slice: every entry a read, no bytes. startMs is the batch
// start time in Unix milliseconds (<= 0 is written as 0, "not given"). app
// must be at most DefaultMaxKeyLen bytes of valid UTF-8 ("" means
// "default"). Entries that a decoder with default limits would reject (empty
// key, key longer than DefaultMaxKeyLen, key not valid UTF-8, count 0) are
// left out, so that one bad key cannot void the whole batch. Producers that
// report bytes or writes use AppendAccesses. The layout is documented in
// docs/wire.md.
func AppendBatch(dst []byte, app string, startMs int64, entries []KeyCount) []byte {
	n := 0
	for _, e := range entries {
		if validKeyCount(e) {
			n++
		}
	}
	dst = appendHeader(dst, batchVersion, app, "", startMs)
	dst = binary.AppendUvarint(dst, uint64(n))
	return appendEntries(dst, entries)
}

// Access is one entry of a version 2 access batch being encoded: Count
// accesses of Key of one Op, which moved Bytes bytes in total (0: not
// known). A producer that sums per key sends one Access per key and op.
type Access struct {
	Key   string
	Count uint64 // accesses; entries with 0 are left out
	Bytes uint64 // value bytes of those accesses, summed; 0 means not given
	Op    Op     // OpRead or OpWrite; entries with another value are left out
}

// AppendAccesses appends a version 2 access batch for app to dst and returns
// the extended slice. Its arguments and the entries it leaves out are those
// of AppendBatch, and also entries whose Op is neither OpRead nor OpWrite. It
// allocates only when dst must grow. The layout is documented in
// docs/wire.md.
func AppendAccesses(dst []byte, app string, startMs int64, entries []Access) []byte {
	return AppendAccessesFrom(dst, app, "", startMs, entries)
}

// AppendAccessesFrom is AppendAccesses for accesses made by src (an app
// instance, a client): a version 3 batch, or version 2 when src is "". src
// must be at most DefaultMaxKeyLen bytes of valid UTF-8.
func AppendAccessesFrom(dst []byte, app, src string, startMs int64, entries []Access) []byte {
	n := 0
	for i := range entries {
		if validAccess(&entries[i]) {
			n++
		}
	}
	version := byte(batchVersion3)
	if src == "" {
		version = batchVersion2
	}
	dst = appendHeader(dst, version, app, src, startMs)
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range entries {
		e := &entries[i]
		if !validAccess(e) {
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
		dst = append(dst, e.Key...)
		dst = binary.AppendUvarint(dst, e.Count)
		dst = append(dst, byte(e.Op)) // 0 or 1: a one-byte varint
		dst = binary.AppendUvarint(dst, e.Bytes)
	}
	return dst
}

// AppendEffects appends an effect batch (version 4) to dst and returns the
// extended slice: what instance src of app did, over the periodMs
// milliseconds that ended at endMs (Unix milliseconds), with the reads of
// each key of effects. Entries with an invalid key (as AppendBatch) or no
// count at all are left out. app and src as in AppendAccessesFrom. The
// layout is documented in docs/wire.md.
func AppendEffects(dst []byte, app, src string, endMs, periodMs int64, effects []Effect) []byte {
	n := 0
	for i := range effects {
		if validEffect(&effects[i]) {
			n++
		}
	}
	dst = appendHeader(dst, effectVersion, app, src, endMs)
	dst = binary.AppendUvarint(dst, uint64(max(periodMs, 0)))
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range effects {
		e := &effects[i]
		if !validEffect(e) {
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
		dst = append(dst, e.Key...)
		dst = binary.AppendUvarint(dst, e.L1Hits)
		dst = binary.AppendUvarint(dst, e.L2Reads)
		dst = binary.AppendUvarint(dst, e.SourceLoads)
		dst = binary.AppendUvarint(dst, e.Limited)
	}
	return dst
}

func validEffect(e *Effect) bool {
	return ValidKey(e.Key) && e.L1Hits|e.L2Reads|e.SourceLoads|e.Limited != 0
}

// appendHeader appends a batch header up to its time: the magic, the
// version, the app, from version 3 on the source, and the time (Unix ms;
// <= 0 is written as 0).
func appendHeader(dst []byte, version byte, app, src string, ms int64) []byte {
	dst = append(dst, batchMagic, version)
	dst = binary.AppendUvarint(dst, uint64(len(app)))
	dst = append(dst, app...)
	if version >= batchVersion3 {
		dst = binary.AppendUvarint(dst, uint64(len(src)))
		dst = append(dst, src...)
	}
	return binary.AppendUvarint(dst, uint64(max(ms, 0)))
}

// ValidKey reports whether k can be the key of a batch entry: 1 to
// DefaultMaxKeyLen bytes of valid UTF-8. The Append functions leave out
// entries whose key is not.
func ValidKey(k string) bool {
	return len(k) > 0 && len(k) <= DefaultMaxKeyLen && utf8.ValidString(k)
}

func validKeyCount(e KeyCount) bool { return e.Count > 0 && ValidKey(e.Key) }

func validAccess(e *Access) bool {
	return e.Count > 0 && e.Op <= OpWrite && ValidKey(e.Key)
}

func appendEntries(dst []byte, entries []KeyCount) []byte {
	for _, e := range entries {
		if !validKeyCount(e) {
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
		dst = append(dst, e.Key...)
		dst = binary.AppendUvarint(dst, e.Count)
	}
	return dst
}

// checkBatchVersion checks the magic and version bytes at the start of an
// access batch: versions 1 to 4 are known.
func checkBatchVersion(b []byte) fail {
	if len(b) >= 2 && b[0] == batchMagic && b[1] >= batchVersion2 && b[1] <= effectVersion {
		return fail{}
	}
	return checkVersionOf(b, batchMagic, batchVersion, "access batch")
}

// checkVersionOf checks that b starts with magic and version.
func checkVersionOf(b []byte, magic, version byte, what string) fail {
	if len(b) == 0 {
		return fail{ReasonEmpty, 0, "empty " + what}
	}
	if b[0] != magic {
		return fail{ReasonBadMagic, 0, "first byte is not the " + what + " magic byte"}
	}
	if len(b) < 2 {
		return fail{ReasonTruncated, 1, "no version byte"}
	}
	if b[1] != version {
		return fail{ReasonUnknownVersion, 1, what + " version " + itoa(uint64(b[1])) + " is not known"}
	}
	return fail{}
}

// checkEntries validates n (key, count) entries starting at b[i] and returns
// the index after them. maxKey 0 means no limit on key length.
func checkEntries(b []byte, i, n, maxKey int) (int, fail) {
	for ; n > 0; n-- {
		var f fail
		if i, f = checkKey(b, i, maxKey); f.r != 0 {
			return i, f
		}
		c, j, f := readUvarint(b, i)
		if f.r != 0 {
			return i, f
		}
		if c == 0 {
			return i, fail{ReasonBadCount, i, "count 0"}
		}
		i = j
	}
	return i, fail{}
}

// checkKey validates the key (length, bytes) at b[i] and returns the index
// after it.
func checkKey(b []byte, i, maxKey int) (int, fail) {
	v, j, f := readUvarint(b, i)
	switch {
	case f.r != 0:
		return i, f
	case v == 0:
		return i, fail{ReasonEmptyKey, i, "empty key"}
	case maxKey > 0 && v > uint64(maxKey):
		return i, fail{ReasonKeyTooLong, i, "key longer than MaxKeyLen"}
	case v > uint64(len(b)-j):
		return i, fail{ReasonTruncated, i, "key length runs past the end"}
	}
	if !utf8.Valid(b[j : j+int(v)]) {
		return i, fail{ReasonBadUTF8, i, "key is not valid UTF-8"}
	}
	return j + int(v), fail{}
}

// checkEntries2 validates n version 2 entries (key, count, op, bytes)
// starting at b[i] and returns the index after them.
func checkEntries2(b []byte, i, n, maxKey int) (int, fail) {
	for ; n > 0; n-- {
		j, f := checkEntries(b, i, 1, maxKey)
		if f.r != 0 {
			return i, f
		}
		op, k, f := readUvarint(b, j)
		if f.r != 0 {
			return j, f
		}
		if op > uint64(OpWrite) {
			return j, fail{ReasonBadValue, j, "op " + itoa(op) + " is neither 0 (read) nor 1 (write)"}
		}
		if _, k, f = readUvarint(b, k); f.r != 0 {
			return k, f
		}
		i = k
	}
	return i, fail{}
}

// batchHeader is what a checked batch's header holds.
type batchHeader struct {
	app, src   []byte
	ts, period int64
	n, start   int // entries, and the offset of the first
}

// decodeBatch decodes a binary access batch: a validation pass, then a
// delivery pass that trusts what the first pass checked.
func (d *Decoder) decodeBatch(b []byte, fn func(*Entry)) error {
	h, f := d.checkBatch(b)
	if f.r != 0 {
		return d.reject(f)
	}
	if len(h.app) == 0 {
		d.defApp = defaultApp
		h.app = d.defApp[:]
	}
	if b[1] == effectVersion {
		d.deliverEffects(b, &h)
		return nil
	}
	v2 := b[1] >= batchVersion2
	e := &d.entry
	i := h.start
	for n := h.n; n > 0; n-- {
		l, j := trustedUvarint(b, i)
		key := b[j : j+int(l) : j+int(l)]
		c, j := trustedUvarint(b, j+int(l))
		// Reset every field: the callback may have changed them.
		*e = Entry{App: h.app, Key: key, Count: c, TS: h.ts, Src: h.src}
		if v2 {
			op, k := trustedUvarint(b, j) // checked: 0 or 1 (maybe not minimally encoded)
			e.Op = Op(op)
			e.Bytes, j = trustedUvarint(b, k)
		}
		i = j
		fn(e)
	}
	return nil
}

// deliverEffects hands a checked effect batch's entries to OnEffect.
func (d *Decoder) deliverEffects(b []byte, h *batchHeader) {
	if d.OnEffect == nil {
		return
	}
	var e EffectEntry
	i := h.start
	for n := h.n; n > 0; n-- {
		l, j := trustedUvarint(b, i)
		e = EffectEntry{App: h.app, Src: h.src, Key: b[j : j+int(l) : j+int(l)], End: h.ts, Period: h.period}
		j += int(l)
		e.L1Hits, j = trustedUvarint(b, j)
		e.L2Reads, j = trustedUvarint(b, j)
		e.SourceLoads, j = trustedUvarint(b, j)
		e.Limited, i = trustedUvarint(b, j)
		d.OnEffect(&e)
	}
}

func (d *Decoder) checkBatch(b []byte) (h batchHeader, f fail) {
	if f = checkBatchVersion(b); f.r != 0 {
		return
	}
	version := b[1]
	max := d.maxKeyLen()
	if v, _, g := readUvarint(b, 2); g.r == 0 && v > uint64(max) {
		return h, fail{ReasonAppTooLong, 2, "app longer than MaxKeyLen"}
	}
	var l, i int
	if l, i, f = readLen(b, 2, "app"); f.r != 0 {
		return
	}
	h.app = b[i : i+l : i+l]
	if !utf8.Valid(h.app) {
		return h, fail{ReasonBadUTF8, i, "app is not valid UTF-8"}
	}
	i += l
	if version >= batchVersion3 {
		if v, _, g := readUvarint(b, i); g.r == 0 && v > uint64(max) {
			return h, fail{ReasonBadValue, i, "source longer than MaxKeyLen"}
		}
		if l, i, f = readLen(b, i, "source"); f.r != 0 {
			return
		}
		h.src = b[i : i+l : i+l]
		if !utf8.Valid(h.src) {
			return h, fail{ReasonBadUTF8, i, "source is not valid UTF-8"}
		}
		i += l
	}
	if h.ts, i, f = readTime(b, i); f.r != 0 {
		return
	}
	minSize, check := minEntrySize, checkEntries
	switch version {
	case batchVersion2, batchVersion3:
		minSize, check = minEntrySize2, checkEntries2
	case effectVersion:
		if h.period, i, f = readTime(b, i); f.r != 0 {
			return
		}
		minSize, check = minEffectSize, checkEffects
	}
	if h.n, i, f = readCount(b, i, minSize, "entry"); f.r != 0 {
		return
	}
	h.start = i
	if i, f = check(b, i, h.n, max); f.r != 0 {
		return
	}
	if i != len(b) {
		f = fail{ReasonTrailingData, i, "bytes after the last entry"}
	}
	return
}

// checkEffects validates n effect entries (key, l1 hits, l2 reads, source
// loads, limited) starting at b[i] and returns the index after them.
func checkEffects(b []byte, i, n, maxKey int) (int, fail) {
	for ; n > 0; n-- {
		j, f := checkKey(b, i, maxKey)
		if f.r != 0 {
			return i, f
		}
		for range 4 {
			if _, j, f = readUvarint(b, j); f.r != 0 {
				return j, f
			}
		}
		i = j
	}
	return i, fail{}
}
