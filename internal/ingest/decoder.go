package ingest

import (
	"bytes"
	"math"
	"unicode/utf8"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// Decoder turns the records of one input into accesses. It keeps scratch
// buffers between calls, so it is not safe for concurrent use: give each
// goroutine its own (they may share the Input).
type Decoder struct {
	p         *plan
	max       int // longest key, app and source, in bytes
	onInvalid func(Reason)
	wd        wire.Decoder // format hotspot

	entry  wire.Entry
	app    []byte        // the constant app
	vals   []val         // the fields of the current line, by slot
	spans  combinedSpans // combined: the groups of the current line
	js     jscan         // json: the scanner
	unesc  [][]byte      // json: unescaped strings, by slot
	key    []byte        // the key being built
	ext    []int         // the extract pattern's submatches
	extSrc []byte        // the field the extract pattern matched
}

// val is a field of a line: its text, and its JSON type (kString for a
// group of combined or regex; kAbsent for a json path with no value or
// null). For a string the text is its contents, unescaped; for another
// JSON value, its JSON text.
type val struct {
	b []byte
	k jkind
}

// drop is why a line was dropped; a zero r means it was not.
type drop struct {
	r    Reason
	off  int    // offset in the line, when known
	what string // a static description
	name string // the field or group concerned, if any
}

func (dr drop) detail() string {
	if dr.name == "" {
		return dr.what
	}
	return dr.what + " " + dr.name
}

// NewDecoder returns a decoder for the records of in. maxKeyLen is the
// longest key and app accepted, in bytes (0 means wire.DefaultMaxKeyLen);
// longer ones are dropped, never truncated. A longer source is left out,
// the access kept (format hotspot: as package wire decides). onInvalid, if not nil, is
// called once for every dropped line (format hotspot: every rejected record
// or line) with its reason, never with 0.
func (in *Input) NewDecoder(maxKeyLen int, onInvalid func(Reason)) *Decoder {
	if maxKeyLen <= 0 {
		maxKeyLen = wire.DefaultMaxKeyLen
	}
	d := &Decoder{max: min(maxKeyLen, math.MaxInt32), onInvalid: onInvalid}
	if in != nil {
		d.p = in.p
	}
	if d.p == nil || d.p.format == fmtHotspot {
		d.wd.MaxKeyLen = d.max
		if onInvalid != nil {
			d.wd.OnInvalid = func(e *wire.Error) { onInvalid(fromWire(e.Reason)) }
		}
		return d
	}
	d.app = []byte(d.p.app)
	d.vals = make([]val, len(d.p.names))
	d.js.spans = make([]jspan, len(d.p.names))
	d.unesc = make([][]byte, len(d.p.names))
	return d
}

// Decode calls fn once for each access in value, one Kafka record's value.
// fn receives a pointer to an Entry owned by the Decoder: its App, Key and
// Src alias value or the Decoder's scratch and are valid only during the
// call.
// An Entry's TS of 0 means the line gives no time: use the record's Kafka
// timestamp.
//
// For format hotspot, value is decoded as wire.Decoder decodes it (a JSON
// object per line, or a binary batch). For the other formats, value holds
// one line or several separated by '\n'; each line is trimmed of spaces,
// tabs and '\r', blank lines are skipped, and every other line yields
// exactly one access or one call of onInvalid. A record with no non-blank
// line is reported once as empty.
//
// Decode returns nil when no line was dropped, or only by a where clause
// (filtered: the input asked for that); otherwise an *Error describing the
// first line dropped, with Skipped the number of such lines. It never
// panics.
func (d *Decoder) Decode(value []byte, fn func(*wire.Entry)) error {
	if d.p == nil || d.p.format == fmtHotspot {
		return d.decodeHotspot(value, fn)
	}
	var first drop
	firstOff, bad, lines := 0, 0, 0
	for start := 0; start <= len(value); {
		end := start + bytes.IndexByte(value[start:], '\n')
		if end < start {
			end = len(value)
		}
		i, j := start, end
		start = end + 1
		for i < j && isBlank(value[i]) {
			i++
		}
		for j > i && isBlank(value[j-1]) {
			j--
		}
		if i == j {
			continue
		}
		lines++
		dr := d.line(value[i:j])
		if dr.r == 0 {
			fn(&d.entry)
			continue
		}
		if d.onInvalid != nil {
			d.onInvalid(dr.r)
		}
		if dr.r == ReasonFiltered {
			continue
		}
		if bad == 0 {
			first, firstOff = dr, i
		}
		bad++
	}
	if lines == 0 {
		if d.onInvalid != nil {
			d.onInvalid(ReasonEmpty)
		}
		return &Error{Reason: ReasonEmpty, Detail: "the record holds no non-blank line", Skipped: 1}
	}
	if bad > 0 {
		return &Error{Reason: first.r, Offset: firstOff + first.off, Detail: first.detail(), Skipped: bad}
	}
	return nil
}

// isBlank reports whether c is trimmed from a line: space, tab or CR (LF
// separates lines).
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// decodeHotspot decodes value as the wire format.
func (d *Decoder) decodeHotspot(value []byte, fn func(*wire.Entry)) error {
	err := d.wd.Decode(value, fn)
	if we, ok := err.(*wire.Error); ok {
		return &Error{Reason: fromWire(we.Reason), Offset: we.Offset, Detail: we.Detail, Skipped: we.Skipped}
	}
	return err
}

// line decodes one trimmed, non-blank line into d.entry.
func (d *Decoder) line(b []byte) drop {
	if dr := d.fields(b); dr.r != 0 {
		return dr
	}
	return d.finish()
}

// fields parses line b into d.vals.
func (d *Decoder) fields(b []byte) drop {
	p := d.p
	switch p.format {
	case fmtCombined:
		if off, want := parseCombined(b, &d.spans); off >= 0 {
			return drop{r: ReasonUnmatched, off: off, what: "the line is not in format combined: expected", name: want}
		}
		for g := range numCombined {
			if s := d.spans[2*g]; s >= 0 {
				d.vals[g] = val{b[s:d.spans[2*g+1]], kString}
			} else {
				d.vals[g] = val{nil, kString}
			}
		}
	case fmtRegex:
		m := p.re.FindSubmatchIndex(b)
		if m == nil {
			return drop{r: ReasonUnmatched, what: "the line does not match the pattern"}
		}
		for g := 1; g < len(d.vals); g++ {
			if s := m[2*g]; s >= 0 {
				d.vals[g] = val{b[s:m[2*g+1]], kString}
			} else {
				d.vals[g] = val{nil, kString}
			}
		}
	case fmtJSON:
		valid, object := d.js.scan(b, p.root)
		switch {
		case !valid:
			return drop{r: ReasonNotJSON, off: d.js.err, what: "the line is not valid JSON (or not valid UTF-8)"}
		case !object:
			return drop{r: ReasonWrongType, what: "the line is JSON but not an object"}
		}
		for slot, sp := range d.js.spans {
			v := val{b[sp.start:sp.end], sp.kind}
			if sp.esc {
				d.unesc[slot] = unescape(d.unesc[slot][:0], v.b)
				v.b = d.unesc[slot]
			}
			d.vals[slot] = v
		}
	}
	return drop{}
}

// finish applies the where clauses, the extract pattern and the mapping to
// the fields of a line, filling d.entry. Its checks run in a fixed order
// (where, extract, key, app, count, time, bytes, op), so a line with
// several problems always reports the same one. The source drops no line:
// one it cannot carry is left out (see source).
func (d *Decoder) finish() drop {
	p := d.p
	e := &d.entry
	*e = wire.Entry{Count: 1, App: d.app}
	d.ext = nil
	for i := range p.where {
		w := &p.where[i]
		v := d.vals[w.slot]
		if v.k >= kObject {
			return drop{r: ReasonWrongType, what: "where: the field is an object or array:", name: w.name}
		}
		if !w.m.match(v.b) {
			return drop{r: ReasonFiltered, what: "where: no match of the field", name: w.name}
		}
	}
	if x := p.extract; x != nil {
		v := d.vals[x.slot]
		switch v.k {
		case kAbsent:
			return drop{r: ReasonMissingField, what: "extract: no value at", name: x.name}
		case kObject, kArray:
			return drop{r: ReasonWrongType, what: "extract: the field is an object or array:", name: x.name}
		}
		// Go's regexp allocates the submatch slice: one allocation per
		// line, the only one in steady state.
		if d.ext = x.re.FindSubmatchIndex(v.b); d.ext == nil {
			return drop{r: ReasonUnmatched, what: "extract: the pattern does not match the field", name: x.name}
		}
		d.extSrc = v.b
	}
	if dr := d.buildKey(); dr.r != 0 {
		return dr
	}
	e.Key = d.key
	if p.appSlot >= 0 {
		switch v := d.vals[p.appSlot]; v.k {
		case kObject, kArray:
			return drop{r: ReasonWrongType, what: "the app field is an object or array:", name: p.names[p.appSlot]}
		case kAbsent:
		default:
			if len(v.b) > 0 {
				e.App = v.b
			}
		}
	}
	switch {
	case len(e.App) > d.max:
		return drop{r: ReasonAppTooLong, what: "the app is longer than maxKeyLen"}
	case !utf8.Valid(e.App):
		return drop{r: ReasonBadUTF8, what: "the app is not valid UTF-8"}
	}
	e.Src, _ = d.source()
	return d.numbers()
}

// source returns the source the line gives, or nil when the input maps
// none or the line gives none: its field is absent, null or empty (in
// format combined also "-", the format's "none"). A source the wire
// contract cannot carry (an object or array, longer than d.max, not valid
// UTF-8) is left out too, and why says why ("" otherwise): the access
// still counts, as it would without a source. Never dropping the line
// keeps an input's counts the same whether it maps a source or not.
func (d *Decoder) source() (src []byte, why string) {
	p := d.p
	if p.srcSlot < 0 {
		return nil, ""
	}
	switch v := d.vals[p.srcSlot]; {
	case v.k == kAbsent || len(v.b) == 0:
	case p.format == fmtCombined && len(v.b) == 1 && v.b[0] == '-':
	case v.k >= kObject:
		return nil, "the field is an object or array"
	case len(v.b) > d.max:
		return nil, "longer than maxKeyLen"
	case !utf8.Valid(v.b):
		return nil, "not valid UTF-8"
	default:
		return v.b, ""
	}
	return nil, ""
}

// buildKey expands the key template into d.key, stopping once it is longer
// than d.max.
func (d *Decoder) buildKey() drop {
	k := d.key[:0]
	for _, r := range d.p.key.parts {
		var s []byte
		switch r.kind {
		case refLit:
			k = appendCapped(k, r.lit, d.max+1)
			continue
		case refSlot:
			v := d.vals[r.idx]
			switch v.k {
			case kAbsent:
				d.key = k
				return drop{r: ReasonMissingField, what: "key: no value at", name: d.p.names[r.idx]}
			case kObject, kArray:
				d.key = k
				return drop{r: ReasonWrongType, what: "key: the field is an object or array:", name: d.p.names[r.idx]}
			}
			s = v.b
		case refGroup:
			if g := d.ext[2*r.idx]; g >= 0 {
				s = d.extSrc[g:d.ext[2*r.idx+1]]
			}
		}
		if k = appendCapped(k, s, d.max+1); len(k) > d.max {
			break
		}
	}
	d.key = k
	switch {
	case len(k) == 0:
		return drop{r: ReasonEmptyKey, what: "the key is empty"}
	case len(k) > d.max:
		return drop{r: ReasonKeyTooLong, what: "the key is longer than maxKeyLen"}
	case !utf8.Valid(k):
		return drop{r: ReasonBadUTF8, what: "the key is not valid UTF-8"}
	}
	return drop{}
}

// appendCapped appends s to k, stopping when k reaches limit bytes.
func appendCapped[S []byte | string](k []byte, s S, limit int) []byte {
	if room := limit - len(k); len(s) > room {
		s = s[:max(room, 0)]
	}
	return append(k, s...)
}

// numbers reads count, time, bytes and op into d.entry.
func (d *Decoder) numbers() drop {
	p, e := d.p, &d.entry
	if p.countSlot >= 0 {
		switch v := d.vals[p.countSlot]; {
		case v.k == kAbsent || v.k == kString && len(v.b) == 0:
		case v.k >= kObject:
			return drop{r: ReasonWrongType, what: "count: the field is an object or array:", name: p.names[p.countSlot]}
		default:
			n, ok := parseUint(v.b)
			if !ok || n == 0 {
				return drop{r: ReasonBadCount, what: "count is not an integer >= 1:", name: p.names[p.countSlot]}
			}
			e.Count = n
		}
	}
	if p.timeSlot >= 0 {
		switch v := d.vals[p.timeSlot]; v.k {
		case kAbsent:
			return drop{r: ReasonMissingField, what: "time: no value at", name: p.names[p.timeSlot]}
		case kObject, kArray:
			return drop{r: ReasonWrongType, what: "time: the field is an object or array:", name: p.names[p.timeSlot]}
		default:
			ts, ok := parseTime(v.b, p.time)
			if !ok {
				return drop{r: ReasonBadTime, what: p.badTime, name: p.names[p.timeSlot]}
			}
			e.TS = ts
		}
	}
	if p.bytesSlot >= 0 {
		switch v := d.vals[p.bytesSlot]; {
		case v.k == kAbsent || v.k == kString && (len(v.b) == 0 || len(v.b) == 1 && v.b[0] == '-'):
		case v.k >= kObject:
			return drop{r: ReasonWrongType, what: "bytes: the field is an object or array:", name: p.names[p.bytesSlot]}
		default:
			n, ok := parseUint(v.b)
			if !ok {
				return drop{r: ReasonBadValue, what: "bytes is not an integer >= 0:", name: p.names[p.bytesSlot]}
			}
			e.Bytes = n
		}
	}
	if p.opSlot >= 0 {
		switch v := d.vals[p.opSlot]; {
		case p.opMethod:
			if !methodIsRead(v.b) {
				e.Op = wire.OpWrite
			}
		case v.k == kAbsent || v.k == kString && len(v.b) == 0:
		case v.k != kString:
			return drop{r: ReasonBadValue, what: "op is not a string:", name: p.names[p.opSlot]}
		default:
			op, ok := parseOp(v.b)
			if !ok {
				return drop{r: ReasonBadValue, what: "op is neither read, write nor an HTTP method:", name: p.names[p.opSlot]}
			}
			e.Op = op
		}
	}
	return drop{}
}

// parseUint parses decimal digits (a JSON integer or a string of digits)
// that fit in 64 bits.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// parseOp parses an op field: "read" or "write", or an HTTP method (GET
// and HEAD read, any other method writes: a word of 1..32 ASCII letters),
// in any case.
func parseOp(b []byte) (wire.Op, bool) {
	switch {
	case asciiEqualFold(b, "read"), asciiEqualFold(b, "get"), asciiEqualFold(b, "head"):
		return wire.OpRead, true
	case len(b) == 0 || len(b) > 32:
		return 0, false
	}
	for _, c := range b {
		if c|0x20 < 'a' || c|0x20 > 'z' {
			return 0, false
		}
	}
	return wire.OpWrite, true
}
