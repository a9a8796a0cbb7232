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

// The reasons. The first block is wire.Reason's, passed through unchanged
// for format hotspot (and used with the same meaning by the other formats
// where marked); the second block is this package's own.
const (
	ReasonEmpty          Reason = iota + 1 // "empty": a record with no non-blank line (all formats)
	ReasonNotJSON                          // "not_json": malformed JSON or invalid UTF-8 (hotspot, json)
	ReasonWrongType                        // "wrong_type": a line that is JSON but not an object, or an object or array where a value is needed (hotspot, json)
	ReasonMissingKey                       // "missing_key": hotspot: a JSON event without "key"
	ReasonEmptyKey                         // "empty_key": the key is empty (all formats)
	ReasonKeyTooLong                       // "key_too_long": the key is longer than maxKeyLen bytes (all formats)
	ReasonAppTooLong                       // "app_too_long": the app is longer than maxKeyLen bytes (all formats)
	ReasonBadCount                         // "bad_count": a count that is not an integer >= 1 (hotspot, json, regex)
	ReasonBadValue                         // "bad_value": a bad bytes or op value (all formats)
	ReasonTruncated                        // "truncated": hotspot only
	ReasonTrailingData                     // "trailing_data": hotspot only
	ReasonBadMagic                         // "bad_magic": hotspot only
	ReasonUnknownVersion                   // "unknown_version": hotspot only
	ReasonBadVarint                        // "bad_varint": hotspot only
	ReasonBadUTF8                          // "bad_utf8": a key or app that is not valid UTF-8 (hotspot, combined, regex)

	ReasonUnmatched    // "unmatched": a combined or regex line, or the field of an extract pattern, that does not match
	ReasonFiltered     // "filtered": a where clause does not match (not an error: see Decoder.Decode)
	ReasonBadTime      // "bad_time": the time field does not parse in the input's time format, or is <= 0
	ReasonMissingField // "missing_field": json: a path that the key, extract or time needs is absent or null
	numReasons
)

var reasonNames = [numReasons]string{
	ReasonEmpty:          "empty",
	ReasonNotJSON:        "not_json",
	ReasonWrongType:      "wrong_type",
	ReasonMissingKey:     "missing_key",
	ReasonEmptyKey:       "empty_key",
	ReasonKeyTooLong:     "key_too_long",
	ReasonAppTooLong:     "app_too_long",
	ReasonBadCount:       "bad_count",
	ReasonBadValue:       "bad_value",
	ReasonTruncated:      "truncated",
	ReasonTrailingData:   "trailing_data",
	ReasonBadMagic:       "bad_magic",
	ReasonUnknownVersion: "unknown_version",
	ReasonBadVarint:      "bad_varint",
	ReasonBadUTF8:        "bad_utf8",
	ReasonUnmatched:      "unmatched",
	ReasonFiltered:       "filtered",
	ReasonBadTime:        "bad_time",
	ReasonMissingField:   "missing_field",
}

// String returns the reason's metric label, e.g. "unmatched".
func (r Reason) String() string {
	if r > 0 && r < numReasons {
		return reasonNames[r]
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

// fromWire maps each wire.Reason to the Reason of the same name. A wire
// reason this package does not know (wire grew one) maps to
// ReasonBadValue; a test catches that.
var fromWire = func() (t [256]Reason) {
	for i := range t {
		t[i] = ReasonBadValue
	}
	for _, wr := range wire.Reasons() {
		for r := Reason(1); r < numReasons; r++ {
			if r.String() == wr.String() {
				t[wr] = r
			}
		}
	}
	return t
}()

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
