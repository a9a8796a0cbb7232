package wire

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of JSON objects and arrays accepted,
// counting the top-level object: encoding/json's limit.
const maxDepth = 10000

// nameMax is the longest field name or "op" value worth decoding; longer
// ones match nothing.
const nameMax = 8

// strSafe[c] reports whether byte c stands for itself in a JSON string and
// needs no further check: printable ASCII other than '"' and '\\'.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// strField is the last value seen for a string field.
type strField struct {
	s   []byte // the decoded string (complete only when n <= the limit)
	n   int    // decoded length in bytes
	set bool   // present and not null
	r   Reason // wrong_type or bad_value, 0 if fine
	off int    // offset of the value
	op  Op     // for "op": the value
}

// numField is the last value seen for an integer field.
type numField struct {
	num number
	set bool
	r   Reason
	off int
}

// number is a syntactically valid JSON number, as far as integers go.
type number struct {
	v    uint64 // magnitude of the integer part
	neg  bool   // has a minus sign
	frac bool   // has a fraction or an exponent
	over bool   // integer part does not fit in 64 bits
}

// objectFields is the last value seen of each field an access event knows.
type objectFields struct {
	key, app, op, src strField
	count, ts, bytes  numField
}

// decodeObject decodes the JSON object at b[i] (b ends where the line ends)
// into d.entry. Duplicate fields behave as in encoding/json: the last wins.
// Syntax is checked in full before any field is judged, so malformed JSON
// is always not_json, truncated or trailing_data.
func (d *Decoder) decodeObject(b []byte, i int) fail {
	var f objectFields
	max := d.maxKeyLen()
	if fl := d.scanObject(b, i, max, &f); fl.r != 0 {
		return fl
	}
	return d.judgeFields(&f, i, max)
}

// scanObject checks the syntax of the object at b[i], which must end the
// line, and reads the fields an access event knows into f; other fields
// are skipped.
func (d *Decoder) scanObject(b []byte, i, max int, f *objectFields) fail {
	if i = skipSpace(b, i+1); i >= len(b) {
		return fail{ReasonTruncated, i, "unterminated object"}
	}
	if b[i] == '}' {
		i++
	} else {
		for {
			if b[i] != '"' {
				return fail{ReasonNotJSON, i, "expected a field name"}
			}
			var fl fail
			if i, fl = d.readField(b, i, max, f); fl.r != 0 {
				return fl
			}
			if i = skipSpace(b, i); i >= len(b) {
				return fail{ReasonTruncated, i, "unterminated object"}
			}
			if b[i] == ',' {
				if i = skipSpace(b, i+1); i >= len(b) {
					return fail{ReasonTruncated, i, "unterminated object"}
				}
				continue
			}
			if b[i] == '}' {
				i++
				break
			}
			return fail{ReasonNotJSON, i, "expected ',' or '}'"}
		}
	}
	if i = skipSpace(b, i); i < len(b) {
		return fail{ReasonTrailingData, i, "data after the object"}
	}
	return fail{}
}

// readField reads the field whose name starts at b[i] and its value into
// f, returning the index after the value.
func (d *Decoder) readField(b []byte, i, max int, f *objectFields) (int, fail) {
	var name []byte
	var fl fail
	if i, name, _, fl = readString(b, i, &d.nameBuf, nameMax); fl.r != 0 {
		return i, fl
	}
	if i, fl = colon(b, i); fl.r != 0 {
		return i, fl
	}
	switch string(name) {
	case "key":
		return d.strField(b, i, &f.key, &d.keyBuf, max)
	case "app":
		return d.strField(b, i, &f.app, &d.appBuf, max)
	case "src":
		return d.strField(b, i, &f.src, &d.srcBuf, max)
	case "op":
		i, fl = d.strField(b, i, &f.op, &d.nameBuf, nameMax)
		if f.op.set && f.op.r == 0 {
			switch string(f.op.s) {
			case "read":
				f.op.op = OpRead
			case "write":
				f.op.op = OpWrite
			default:
				f.op.r = ReasonBadValue
			}
		}
		return i, fl
	case "count":
		return d.numField(b, i, &f.count)
	case "ts":
		return d.numField(b, i, &f.ts)
	case "bytes":
		return d.numField(b, i, &f.bytes)
	}
	return d.skipValue(b, i, 1)
}

// judgeFields checks the values of a syntactically valid object, whose
// opening brace is at offset start, and fills d.entry from them. The
// checks run in a fixed order (key, app, count, ts, bytes, op, src), so an
// object with several bad fields always reports the same one.
func (d *Decoder) judgeFields(f *objectFields, start, max int) fail {
	e := &d.entry
	*e = Entry{Count: 1}
	if fl := d.judgeKeyApp(f, start, max); fl.r != 0 {
		return fl
	}
	if f.count.set || f.ts.set || f.bytes.set { // most events carry none
		if fl := judgeNumbers(f, e); fl.r != 0 {
			return fl
		}
	}
	if f.op.set {
		switch f.op.r {
		case ReasonWrongType:
			return fail{ReasonWrongType, f.op.off, `"op" is not a string`}
		case ReasonBadValue:
			return fail{ReasonBadValue, f.op.off, `"op" is neither "read" nor "write"`}
		}
		e.Op = f.op.op
	}
	if src := &f.src; src.set {
		switch {
		case src.r != 0:
			return fail{ReasonWrongType, src.off, `"src" is not a string`}
		case src.n > max:
			return fail{ReasonBadValue, src.off, `"src" longer than MaxKeyLen`}
		}
		e.Src = src.s
	}
	return fail{}
}

// judgeKeyApp checks "key" (required) and "app" (default "default").
func (d *Decoder) judgeKeyApp(f *objectFields, start, max int) fail {
	e := &d.entry
	switch key := &f.key; {
	case !key.set:
		return fail{ReasonMissingKey, start, `no "key" field`}
	case key.r != 0:
		return fail{ReasonWrongType, key.off, `"key" is not a string`}
	case key.n > max:
		return fail{ReasonKeyTooLong, key.off, "key longer than MaxKeyLen"}
	case key.n == 0:
		return fail{ReasonEmptyKey, key.off, "empty key"}
	}
	e.Key = f.key.s
	switch app := &f.app; {
	case app.r != 0:
		return fail{ReasonWrongType, app.off, `"app" is not a string`}
	case app.n > max:
		return fail{ReasonAppTooLong, app.off, "app longer than MaxKeyLen"}
	case app.set && app.n > 0:
		e.App = app.s
	default:
		d.defApp = defaultApp
		e.App = d.defApp[:]
	}
	return fail{}
}

// judgeNumbers checks the optional "count" (an integer >= 1, default 1),
// "ts" and "bytes" (integers >= 0) into e.
func judgeNumbers(f *objectFields, e *Entry) fail {
	if f.count.set {
		c := f.count.num
		switch {
		case f.count.r != 0:
			return fail{ReasonWrongType, f.count.off, `"count" is not a number`}
		case c.neg || c.frac || c.over || c.v == 0:
			return fail{ReasonBadCount, f.count.off, "count is not an integer >= 1"}
		}
		e.Count = c.v
	}
	if f.ts.set {
		c := f.ts.num
		switch {
		case f.ts.r != 0:
			return fail{ReasonWrongType, f.ts.off, `"ts" is not a number`}
		case c.frac || c.over || c.v > math.MaxInt64 || c.neg && c.v != 0:
			return fail{ReasonBadValue, f.ts.off, `"ts" is not an integer >= 0`}
		}
		e.TS = int64(c.v)
	}
	if f.bytes.set {
		c := f.bytes.num
		switch {
		case f.bytes.r != 0:
			return fail{ReasonWrongType, f.bytes.off, `"bytes" is not a number`}
		case c.neg || c.frac || c.over:
			return fail{ReasonBadValue, f.bytes.off, `"bytes" is not an integer >= 0`}
		}
		e.Bytes = c.v
	}
	return fail{}
}

// colon skips the ':' after a field name and the whitespace around it,
// returning the index of the value.
func colon(b []byte, i int) (int, fail) {
	if i = skipSpace(b, i); i >= len(b) {
		return i, fail{ReasonTruncated, i, "unterminated object"}
	}
	if b[i] != ':' {
		return i, fail{ReasonNotJSON, i, "expected ':' after a field name"}
	}
	if i = skipSpace(b, i+1); i >= len(b) {
		return i, fail{ReasonTruncated, i, "missing value"}
	}
	return i, fail{}
}

// strField reads the value at b[i] of a field that takes a string or null.
func (d *Decoder) strField(b []byte, i int, v *strField, buf *[]byte, limit int) (int, fail) {
	*v = strField{set: true, off: i}
	switch b[i] {
	case '"':
		var f fail
		i, v.s, v.n, f = readString(b, i, buf, limit)
		return i, f
	case 'n':
		v.set = false // null: as if absent
		return d.skipValue(b, i, 1)
	}
	v.r = ReasonWrongType
	return d.skipValue(b, i, 1)
}

// numField reads the value at b[i] of a field that takes a number or null.
func (d *Decoder) numField(b []byte, i int, v *numField) (int, fail) {
	*v = numField{set: true, off: i}
	if c := b[i]; c == '-' || c >= '0' && c <= '9' {
		var f fail
		i, v.num, f = readNumber(b, i)
		return i, f
	}
	if b[i] == 'n' {
		v.set = false
		return d.skipValue(b, i, 1)
	}
	v.r = ReasonWrongType
	return d.skipValue(b, i, 1)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && isSpace(b[i]) {
		i++
	}
	return i
}

// readString reads the JSON string whose opening quote is b[i]. It returns
// the index after the closing quote, the decoded string and its decoded
// length n. The string aliases b when it holds no escapes; otherwise it is
// decoded into *buf, which is reused and never grows past limit+1 bytes: when
// n > limit the returned string is incomplete. With a nil buf (and limit -1)
// the string is only validated.
func readString(b []byte, i int, buf *[]byte, limit int) (int, []byte, int, fail) {
	start := i + 1
	j := ScanJSONSafe(b, start)
	if j < len(b) && b[j] == '"' {
		return j + 1, b[start:j:j], j - start, fail{}
	}
	return readStringSlow(b, start, j, buf, limit)
}

// readStringSlow continues readString at b[j], the first byte that is not
// plain printable ASCII.
func readStringSlow(b []byte, start, j int, buf *[]byte, limit int) (int, []byte, int, fail) {
	var out []byte
	copying := false // an escape was seen: the string lives in out
	n := 0           // decoded length, once copying
	for {
		k := ScanJSONSafe(b, j)
		if copying {
			out = appendCapped(out, b[j:k], limit)
			n += k - j
		}
		if j = k; j >= len(b) {
			return j, nil, 0, fail{ReasonTruncated, j, "unterminated string"}
		}
		switch c := b[j]; {
		case c == '"':
			if !copying {
				return j + 1, b[start:j:j], j - start, fail{}
			}
			if buf != nil {
				*buf = out
			}
			return j + 1, out[:len(out):len(out)], n, fail{}
		case c == '\\':
			if !copying {
				copying = true
				if buf != nil {
					out = appendCapped((*buf)[:0], b[start:j], limit)
				}
				n = j - start
			}
			r, w, f := readEscape(b, j)
			if f.r != 0 {
				return j, nil, 0, f
			}
			j += w
			var tmp [utf8.UTFMax]byte
			m := utf8.EncodeRune(tmp[:], r)
			out = appendCapped(out, tmp[:m], limit)
			n += m
		case c < 0x20:
			return j, nil, 0, fail{ReasonNotJSON, j, "control character in string"}
		default: // c >= 0x80
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size == 1 {
				if !utf8.FullRune(b[j:]) {
					return j, nil, 0, fail{ReasonTruncated, j, "unterminated string"}
				}
				return j, nil, 0, fail{ReasonNotJSON, j, "invalid UTF-8 in string"}
			}
			if copying {
				out = appendCapped(out, b[j:j+size], limit)
				n += size
			}
			j += size
		}
	}
}

// ScanJSONSafe returns the index of the first byte at or after b[j] that
// does not stand for itself in a JSON string (printable ASCII other than
// '"' and '\\' does): a quote, a backslash, a control byte or a byte of a
// multi-byte UTF-8 sequence, or len(b). Package ingest's JSON scanner shares
// it. It tests eight bytes at a time: each term below sets the high bit
// of a byte that is >= 0x80, < 0x20, '"' or '\\'. A borrow can only leave a
// byte whose own high bit is then set, so the lowest flagged byte is always a
// true match and TrailingZeros finds it exactly.
func ScanJSONSafe(b []byte, j int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for j+8 <= len(b) {
		v := binary.LittleEndian.Uint64(b[j:])
		if m := (v | (v - lo*0x20) | ((v ^ (lo * '"')) - lo) | ((v ^ (lo * '\\')) - lo)) & hi; m != 0 {
			return j + bits.TrailingZeros64(m)/8
		}
		j += 8
	}
	for j < len(b) && strSafe[b[j]] {
		j++
	}
	return j
}

// appendCapped appends s to out without letting out grow past limit+1
// bytes, which is enough to tell that a string is too long.
func appendCapped(out, s []byte, limit int) []byte {
	room := limit + 1 - len(out)
	if room <= 0 {
		return out
	}
	if len(s) > room {
		s = s[:room]
	}
	return append(out, s...)
}

// readEscape decodes the escape sequence at b[j] == '\\' the way
// encoding/json does: a \u escape of a surrogate that is not the first half
// of a valid pair decodes to U+FFFD.
func readEscape(b []byte, j int) (rune, int, fail) {
	if j+1 >= len(b) {
		return 0, 0, fail{ReasonTruncated, j, "unterminated string"}
	}
	switch b[j+1] {
	case '"', '\\', '/':
		return rune(b[j+1]), 2, fail{}
	case 'b':
		return '\b', 2, fail{}
	case 'f':
		return '\f', 2, fail{}
	case 'n':
		return '\n', 2, fail{}
	case 'r':
		return '\r', 2, fail{}
	case 't':
		return '\t', 2, fail{}
	case 'u':
		r, f := hex4(b, j+2)
		if f.r != 0 {
			return 0, 0, f
		}
		if !utf16.IsSurrogate(r) {
			return r, 6, fail{}
		}
		if j+12 <= len(b) && b[j+6] == '\\' && b[j+7] == 'u' {
			if r2, g := hex4(b, j+8); g.r == 0 {
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					return dec, 12, fail{}
				}
			}
		}
		return utf8.RuneError, 6, fail{}
	}
	return 0, 0, fail{ReasonNotJSON, j, "invalid escape sequence"}
}

// hex4 decodes the four hex digits at b[i].
func hex4(b []byte, i int) (rune, fail) {
	var r rune
	for k := i; k < i+4; k++ {
		if k >= len(b) {
			return 0, fail{ReasonTruncated, k, "unterminated string"}
		}
		c := b[k]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, fail{ReasonNotJSON, k, "invalid \\u escape"}
		}
		r = r<<4 | rune(c)
	}
	return r, fail{}
}

// readNumber reads the JSON number at b[i] (a '-' or a digit).
func readNumber(b []byte, i int) (int, number, fail) {
	var n number
	if b[i] == '-' {
		n.neg = true
		i++
	}
	if i >= len(b) {
		return i, n, fail{ReasonTruncated, i, "unterminated number"}
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			d := uint64(b[i] - '0')
			if n.v > (math.MaxUint64-d)/10 {
				n.over = true
			}
			n.v = n.v*10 + d
		}
	default:
		return i, n, fail{ReasonNotJSON, i, "invalid number"}
	}
	if i < len(b) && b[i] == '.' {
		n.frac = true
		if i = digits(b, i+1); i < 0 {
			return -i, n, numFail(b, -i)
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		n.frac = true
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i = digits(b, i); i < 0 {
			return -i, n, numFail(b, -i)
		}
	}
	return i, n, fail{}
}

// digits skips one or more digits at b[i]; it returns -i if there are none.
func digits(b []byte, i int) int {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == i {
		return -i
	}
	return j
}

func numFail(b []byte, i int) fail {
	if i >= len(b) {
		return fail{ReasonTruncated, i, "unterminated number"}
	}
	return fail{ReasonNotJSON, i, "invalid number"}
}

// readLiteral checks that the literal lit (true, false or null) is at b[i].
func readLiteral(b []byte, i int, lit string) (int, fail) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return i + k, fail{ReasonTruncated, i + k, "unterminated literal"}
		}
		if b[i+k] != lit[k] {
			return i + k, fail{ReasonNotJSON, i + k, "invalid literal"}
		}
	}
	return i + len(lit), fail{}
}

// skipValue validates and skips the JSON value at b[i] (no leading
// whitespace), nested in depth containers. It needs no recursion: the kind
// of each open container is kept as one bit in d.nest.
func (d *Decoder) skipValue(b []byte, i, depth int) (int, fail) {
	base := depth
	var f fail
value:
	for {
		if i >= len(b) {
			return i, fail{ReasonTruncated, i, "missing value"}
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth++; depth > maxDepth {
				return i, fail{ReasonNotJSON, i, "nesting deeper than 10000"}
			}
			obj := c == '{'
			if obj {
				d.nest[depth/64] |= 1 << (depth % 64)
			} else {
				d.nest[depth/64] &^= 1 << (depth % 64)
			}
			if i = skipSpace(b, i+1); i >= len(b) {
				return i, fail{ReasonTruncated, i, "unterminated container"}
			}
			if obj && b[i] == '}' || !obj && b[i] == ']' {
				i++
				depth--
				break
			}
			if obj {
				if i, f = skipName(b, i); f.r != 0 {
					return i, f
				}
			}
			continue value
		case c == '"':
			if i, _, _, f = readString(b, i, nil, -1); f.r != 0 {
				return i, f
			}
		case c == '-' || c >= '0' && c <= '9':
			if i, _, f = readNumber(b, i); f.r != 0 {
				return i, f
			}
		case c == 't':
			if i, f = readLiteral(b, i, "true"); f.r != 0 {
				return i, f
			}
		case c == 'f':
			if i, f = readLiteral(b, i, "false"); f.r != 0 {
				return i, f
			}
		case c == 'n':
			if i, f = readLiteral(b, i, "null"); f.r != 0 {
				return i, f
			}
		default:
			return i, fail{ReasonNotJSON, i, "invalid character at the start of a value"}
		}
		// A value ended: close containers until one continues.
		for depth > base {
			if i = skipSpace(b, i); i >= len(b) {
				return i, fail{ReasonTruncated, i, "unterminated container"}
			}
			obj := d.nest[depth/64]&(1<<(depth%64)) != 0
			switch c := b[i]; {
			case c == ',':
				if i = skipSpace(b, i+1); obj {
					if i, f = skipName(b, i); f.r != 0 {
						return i, f
					}
				}
				continue value
			case obj && c == '}' || !obj && c == ']':
				i++
				depth--
			default:
				return i, fail{ReasonNotJSON, i, "expected ',' or a closing bracket"}
			}
		}
		return i, fail{}
	}
}

// skipName skips a field name and its colon inside a skipped object.
func skipName(b []byte, i int) (int, fail) {
	if i >= len(b) {
		return i, fail{ReasonTruncated, i, "unterminated object"}
	}
	if b[i] != '"' {
		return i, fail{ReasonNotJSON, i, "expected a field name"}
	}
	i, _, _, f := readString(b, i, nil, -1)
	if f.r != 0 {
		return i, f
	}
	return colon(b, i)
}
