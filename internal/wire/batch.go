package wire

import (
	"encoding/binary"
	"unicode/utf8"
)

// The access batch's first bytes. 0xA5 is a UTF-8 continuation byte, so no
// JSON text or log line starts with it.
const (
	batchMagic   = 0xA5
	batchVersion = 1
)

// minEntrySize is the smallest encoded (key, count) entry: a one-byte length,
// a one-byte key and a one-byte count.
const minEntrySize = 3

// AppendBatch appends the SDK's binary access batch (current version) for app
// to dst and returns the extended slice. startMs is the batch start time in
// Unix milliseconds (<= 0 is written as 0, "not given"). app must be at most
// DefaultMaxKeyLen bytes of valid UTF-8 ("" means "default"). Entries that a
// decoder with default limits would reject (empty key, key longer than
// DefaultMaxKeyLen, key not valid UTF-8, count 0) are left out, so that one bad key cannot void the whole batch.
// The layout is documented in docs/wire.md.
func AppendBatch(dst []byte, app string, startMs int64, entries []KeyCount) []byte {
	n := 0
	for _, e := range entries {
		if validKeyCount(e) {
			n++
		}
	}
	dst = append(dst, batchMagic, batchVersion)
	dst = binary.AppendUvarint(dst, uint64(len(app)))
	dst = append(dst, app...)
	dst = binary.AppendUvarint(dst, uint64(max(startMs, 0)))
	dst = binary.AppendUvarint(dst, uint64(n))
	return appendEntries(dst, entries)
}

func validKeyCount(e KeyCount) bool {
	return e.Count > 0 && len(e.Key) > 0 && len(e.Key) <= DefaultMaxKeyLen && utf8.ValidString(e.Key)
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

// checkVersion checks the magic and version bytes at the start of b.
func checkVersion(b []byte, magic byte, what string) fail {
	return checkVersionOf(b, magic, batchVersion, what)
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
		i = j + int(v)
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

// decodeBatch decodes a binary access batch: a validation pass, then a
// delivery pass that trusts what the first pass checked.
func (d *Decoder) decodeBatch(b []byte, fn func(*Entry)) error {
	app, ts, n, i, f := d.checkBatch(b)
	if f.r != 0 {
		return d.reject(f)
	}
	if len(app) == 0 {
		d.defApp = defaultApp
		app = d.defApp[:]
	}
	e := &d.entry
	for ; n > 0; n-- {
		l, j := trustedUvarint(b, i)
		key := b[j : j+int(l) : j+int(l)]
		c, j := trustedUvarint(b, j+int(l))
		i = j
		// Reset every field: the callback may have changed them.
		*e = Entry{App: app, Key: key, Count: c, TS: ts}
		fn(e)
	}
	return nil
}

func (d *Decoder) checkBatch(b []byte) (app []byte, ts int64, n, start int, f fail) {
	if f = checkVersion(b, batchMagic, "access batch"); f.r != 0 {
		return
	}
	max := d.maxKeyLen()
	if v, _, g := readUvarint(b, 2); g.r == 0 && v > uint64(max) {
		return nil, 0, 0, 0, fail{ReasonAppTooLong, 2, "app longer than MaxKeyLen"}
	}
	var l, i int
	if l, i, f = readLen(b, 2, "app"); f.r != 0 {
		return
	}
	app = b[i : i+l : i+l]
	if !utf8.Valid(app) {
		return nil, 0, 0, 0, fail{ReasonBadUTF8, i, "app is not valid UTF-8"}
	}
	if ts, i, f = readTime(b, i+l); f.r != 0 {
		return
	}
	if n, i, f = readCount(b, i, minEntrySize, "entry"); f.r != 0 {
		return
	}
	start = i
	if i, f = checkEntries(b, i, n, max); f.r != 0 {
		return
	}
	if i != len(b) {
		f = fail{ReasonTrailingData, i, "bytes after the last entry"}
	}
	return
}
