package wire

import (
	"bytes"
	"math"
)

// Decoder decodes access-event record values. The zero value is ready to
// use. A Decoder keeps scratch buffers between calls, so it is not safe for
// concurrent use: give each goroutine its own.
type Decoder struct {
	MaxKeyLen int // longest accepted key and app name, in bytes; 0 means DefaultMaxKeyLen

	// OnInvalid, if set, is called once for every rejected record or line,
	// including the one that Decode returns, so that a caller can count
	// each bad line of newline-separated JSON by its own reason. The
	// *Error is valid only during the call.
	OnInvalid func(*Error)

	// OnEffect, if set, receives each entry of an effect batch (version 4:
	// what the apps' caches did with hot keys' reads). Without it effect
	// batches are validated and skipped: they carry no accesses.
	OnEffect func(*EffectEntry)

	entry   Entry
	keyBuf  []byte // unescaped "key" string, at most MaxKeyLen+1 bytes
	appBuf  []byte // unescaped "app" string, at most MaxKeyLen+1 bytes
	srcBuf  []byte // unescaped "src" string, at most MaxKeyLen+1 bytes
	nameBuf []byte // unescaped field name or "op" value, at most nameMax+1 bytes
	defApp  [len(defaultApp)]byte
	invalid Error
	nest    [(maxDepth + 64) / 64]uint64 // bit d set: container at depth d is an object
}

func (d *Decoder) maxKeyLen() int {
	if d.MaxKeyLen > 0 {
		// Clamped so that limit+1 (see appendCapped) cannot overflow.
		return min(d.MaxKeyLen, math.MaxInt32)
	}
	return DefaultMaxKeyLen
}

// Decode calls fn for each entry of one record value. The format is
// detected by the first byte:
//   - 0xA5: the SDK's binary batch. It is validated whole before fn sees
//     any entry; on error fn is never called.
//   - any other byte >= 0x80, or a control byte that is not JSON
//     whitespace: rejected with bad_magic.
//   - anything else: JSON objects, one per line (lines end with '\n'; an
//     object cannot span lines; blank lines are ignored). Each line stands
//     alone: good lines are delivered, bad lines are skipped, and Decode
//     returns an *Error describing the first bad line whose Skipped field
//     is the number of bad lines. OnInvalid sees every bad line.
//
// Decode returns nil or an *Error. fn receives a pointer to an Entry owned
// by the Decoder; see Entry for how long its contents stay valid.
func (d *Decoder) Decode(value []byte, fn func(*Entry)) error {
	if len(value) == 0 {
		return d.reject(fail{ReasonEmpty, 0, "empty record"})
	}
	switch c := value[0]; {
	case c == batchMagic:
		return d.decodeBatch(value, fn)
	case c >= 0x80 || c < 0x20 && !isSpace(c):
		return d.reject(fail{ReasonBadMagic, 0, "first byte is neither JSON nor a known binary format"})
	}
	return d.decodeLines(value, fn)
}

// reject reports a failure of a whole record.
func (d *Decoder) reject(f fail) error {
	if d.OnInvalid != nil {
		d.invalid = Error{Reason: f.r, Offset: f.off, Detail: f.detail, Skipped: 1}
		d.OnInvalid(&d.invalid)
	}
	return f.err(1)
}

func (d *Decoder) decodeLines(v []byte, fn func(*Entry)) error {
	var first fail
	bad, lines := 0, 0
	for start := 0; start <= len(v); {
		end := start + bytes.IndexByte(v[start:], '\n')
		if end < start {
			end = len(v)
		}
		i, j := start, end
		start = end + 1
		for i < j && isSpace(v[i]) {
			i++
		}
		for j > i && isSpace(v[j-1]) {
			j--
		}
		if i == j {
			continue
		}
		lines++
		f := d.decodeLine(v[:j], i)
		if f.r == 0 {
			fn(&d.entry)
			continue
		}
		if bad == 0 {
			first = f
		}
		bad++
		if d.OnInvalid != nil {
			d.invalid = Error{Reason: f.r, Offset: f.off, Detail: f.detail, Skipped: 1}
			d.OnInvalid(&d.invalid)
		}
	}
	if lines == 0 {
		return d.reject(fail{ReasonEmpty, 0, "record holds only whitespace"})
	}
	if bad > 0 {
		return first.err(bad)
	}
	return nil
}

// decodeLine decodes the JSON text b[i:] (b ends where the line ends, so
// offsets into b are offsets into the record) into d.entry.
func (d *Decoder) decodeLine(b []byte, i int) fail {
	if b[i] == '{' {
		return d.decodeObject(b, i)
	}
	// Not an object: tell a JSON value of another type (wrong_type) from
	// text that is not JSON at all.
	j, f := d.skipValue(b, i, 0)
	if f.r != 0 {
		return f
	}
	if j = skipSpace(b, j); j != len(b) {
		return fail{ReasonTrailingData, j, "data after the JSON value"}
	}
	return fail{ReasonWrongType, i, "line is a JSON value but not an object"}
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}
