package wire

// Reason says why a record, a line of a record, or a partial-count batch was
// rejected. Its String form is the value of the "reason" metric label.
type Reason uint8

// The reasons. Syntax reasons (not_json, truncated, trailing_data) take
// precedence over the field reasons, which are checked in the order key,
// app, count, ts, bytes, op.
const (
	ReasonEmpty          Reason = iota + 1 // "empty": empty or whitespace-only record or body
	ReasonNotJSON                          // "not_json": malformed JSON, including invalid UTF-8 in a string
	ReasonWrongType                        // "wrong_type": a known field, or a whole line, has the wrong JSON type
	ReasonMissingKey                       // "missing_key": a JSON object without "key" (or with "key":null)
	ReasonEmptyKey                         // "empty_key": a key of zero bytes
	ReasonKeyTooLong                       // "key_too_long": a key longer than MaxKeyLen bytes
	ReasonAppTooLong                       // "app_too_long": an app name longer than MaxKeyLen bytes
	ReasonBadCount                         // "bad_count": a count that is not an integer >= 1 that fits in 64 bits
	ReasonBadValue                         // "bad_value": bad "ts", "bytes" or "op" value, or batch time out of range
	ReasonTruncated                        // "truncated": the input ends early, or a length or entry count overruns it
	ReasonTrailingData                     // "trailing_data": bytes after a complete object or batch
	ReasonBadMagic                         // "bad_magic": a binary first byte that is not this format's magic
	ReasonUnknownVersion                   // "unknown_version": a batch version this package does not know
	ReasonBadVarint                        // "bad_varint": a varint longer than 10 bytes or overflowing 64 bits
	ReasonBadUTF8                          // "bad_utf8": a key, app or source in a binary batch that is not valid UTF-8
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
}

// String returns the reason's metric label, e.g. "not_json".
func (r Reason) String() string {
	if r > 0 && r < numReasons {
		return reasonNames[r]
	}
	return "reason(" + itoa(uint64(r)) + ")"
}

// Reasons returns every Reason, for pre-registering metric label values.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := Reason(1); r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// Error is the error returned for rejected input. Use errors.As to get it.
type Error struct {
	Reason Reason
	Offset int    // byte offset in the record value or body where the problem was found
	Detail string // human-readable detail
	// Skipped is the number of units rejected by the call that returned the
	// error: the number of bad lines of newline-separated JSON (this Error
	// describes the first), otherwise 1.
	Skipped int
}

func (e *Error) Error() string {
	s := "wire: " + e.Reason.String() + " at byte " + itoa(uint64(e.Offset)) + ": " + e.Detail
	if e.Skipped > 1 {
		s += " (" + itoa(uint64(e.Skipped)) + " bad lines)"
	}
	return s
}

// fail is an Error under construction; a zero r means success. It is passed
// by value so that rejecting input costs no allocation until an *Error is
// returned.
type fail struct {
	r      Reason
	off    int
	detail string
}

func (f fail) err(skipped int) *Error {
	return &Error{Reason: f.r, Offset: f.off, Detail: f.detail, Skipped: skipped}
}
