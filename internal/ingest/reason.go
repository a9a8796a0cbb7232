package ingest

import (
	"strconv"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// Reason says why a line (or, for format hotspot, a record) was dropped. Its
// String form is the value of the "reason" metric label. The reasons that
// wire.Reason also has keep wire's names, so a label means the same thing
// whatever the input's format.
type Reason uint8

// The reasons. The first block is wire.Reason's, the same values and names,
// passed through unchanged for format hotspot (and used with the same
// meaning by the other formats where marked); the second block is this
// package's own, numbered after wire's.
const (
	ReasonEmpty          = Reason(wire.ReasonEmpty)          // "empty": a record with no non-blank line (all formats)
	ReasonNotJSON        = Reason(wire.ReasonNotJSON)        // "not_json": malformed JSON or invalid UTF-8 (hotspot, json)
	ReasonWrongType      = Reason(wire.ReasonWrongType)      // "wrong_type": a line that is JSON but not an object, or an object or array where a value is needed (hotspot, json)
	ReasonMissingKey     = Reason(wire.ReasonMissingKey)     // "missing_key": hotspot: a JSON event without "key"
	ReasonEmptyKey       = Reason(wire.ReasonEmptyKey)       // "empty_key": the key is empty (all formats)
	ReasonKeyTooLong     = Reason(wire.ReasonKeyTooLong)     // "key_too_long": the key is longer than maxKeyLen bytes (all formats)
	ReasonAppTooLong     = Reason(wire.ReasonAppTooLong)     // "app_too_long": the app is longer than maxKeyLen bytes (all formats)
	ReasonBadCount       = Reason(wire.ReasonBadCount)       // "bad_count": a count that is not an integer >= 1 (hotspot, json, regex)
	ReasonBadValue       = Reason(wire.ReasonBadValue)       // "bad_value": a bad bytes or op value (all formats)
	ReasonTruncated      = Reason(wire.ReasonTruncated)      // "truncated": hotspot only
	ReasonTrailingData   = Reason(wire.ReasonTrailingData)   // "trailing_data": hotspot only
	ReasonBadMagic       = Reason(wire.ReasonBadMagic)       // "bad_magic": hotspot only
	ReasonUnknownVersion = Reason(wire.ReasonUnknownVersion) // "unknown_version": hotspot only
	ReasonBadVarint      = Reason(wire.ReasonBadVarint)      // "bad_varint": hotspot only
	ReasonBadUTF8        = Reason(wire.ReasonBadUTF8)        // "bad_utf8": a key or app that is not valid UTF-8 (hotspot, combined, regex)
)

const (
	ReasonUnmatched    = ReasonBadUTF8 + 1 + iota // "unmatched": a combined or regex line, or the field of an extract pattern, that does not match
	ReasonFiltered                                // "filtered": a where clause does not match (not an error: see Decoder.Decode)
	ReasonBadTime                                 // "bad_time": the time field does not parse in the input's time format, or is <= 0
	ReasonMissingField                            // "missing_field": json: a path that the key, extract or time needs is absent or null
	numReasons
)

// reasonNames are the names of the reasons from ReasonUnmatched on, in
// order; the array's type checks their number.
var reasonNames = [numReasons - ReasonUnmatched]string{"unmatched", "filtered", "bad_time", "missing_field"}

// String returns the reason's metric label, e.g. "unmatched": wire's name
// for wire's reasons.
func (r Reason) String() string {
	switch {
	case r > 0 && r < ReasonUnmatched:
		return wire.Reason(r).String()
	case r >= ReasonUnmatched && r < numReasons:
		return reasonNames[r-ReasonUnmatched]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Reasons returns every Reason, for pre-registering metric label values.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := Reason(1); r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// fromWire returns the Reason of a wire.Reason: the same value. A wire
// reason this package does not know (wire grew one) maps to
// ReasonBadValue; a test catches that.
func fromWire(r wire.Reason) Reason {
	if r == 0 || Reason(r) >= ReasonUnmatched {
		return ReasonBadValue
	}
	return Reason(r)
}

// Error is the error Decode returns for a record with a dropped line (or,
// for format hotspot, a rejected record). Use errors.As to get it.
type Error struct {
	Reason Reason
	Offset int    // byte offset in the record value of the problem: where the line stops being valid (combined, json) or where it starts
	Detail string // human-readable detail
	// Skipped is the number of lines the call dropped as errors; this
	// Error describes the first. Filtered lines are not errors and are not
	// counted here.
	Skipped int
}

// Error returns e as text: "ingest: REASON at byte N: DETAIL", with the
// number of bad lines when there were several.
func (e *Error) Error() string {
	s := "ingest: " + e.Reason.String() + " at byte " + strconv.Itoa(e.Offset) + ": " + e.Detail
	if e.Skipped > 1 {
		s += " (" + strconv.Itoa(e.Skipped) + " bad lines)"
	}
	return s
}
