package access

import "strconv"

// DefaultMaxKeyLen is the longest key and app name, in bytes, that a
// decoder accepts unless told otherwise, and the longest key the encoders
// write.
const DefaultMaxKeyLen = 1024

// DefaultApp is the app of an access event that names none.
const DefaultApp = "default"

// Op is the kind of access an event records.
type Op uint8

// The kinds of access.
const (
	OpRead  Op = iota // a read (the default)
	OpWrite           // a write
)

// String returns "read" or "write" (or "op(N)" for an unknown value).
func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	}
	return "op(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// Entry is one decoded access. App and Key alias the record (or the
// decoder's scratch) and are valid only during the callback that receives
// the Entry; copy them to keep them, and do not modify their bytes.
type Entry struct {
	App   []byte // never empty: DefaultApp when the record names no app
	Key   []byte // 1..MaxKeyLen bytes
	Count uint64 // >= 1
	TS    int64  // Unix milliseconds; 0 means not given (use the record's timestamp)
	Bytes uint64 // value bytes the Count accesses moved in total (one access: the value's size); 0 means not given
	Op    Op     // OpRead for every version 1 batch entry
	Src   []byte // who made the accesses (an app instance, a client address); empty when not given
}
