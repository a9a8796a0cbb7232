package wire

// DefaultMaxKeyLen is the longest key and app name, in bytes, that a Decoder
// accepts when its MaxKeyLen is 0, and the longest key the encoders write.
const DefaultMaxKeyLen = 1024

// Op is the kind of access an event records.
type Op uint8

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
	return "op(" + itoa(uint64(o)) + ")"
}

// Entry is one decoded access. App and Key alias the record (or the
// Decoder's scratch) and are valid only during the callback that receives
// the Entry; copy them to keep them, and do not modify their bytes.
type Entry struct {
	App   []byte // never empty: "default" when the record names no app
	Key   []byte // 1..MaxKeyLen bytes
	Count uint64 // >= 1
	TS    int64  // Unix milliseconds; 0 means not given (use the record's timestamp)
	Bytes uint64 // value bytes the Count accesses moved in total (one access: the value's size); 0 means not given
	Op    Op     // OpRead for every version 1 batch entry
}

// KeyCount is one key's counts in a batch being encoded. The access batch
// of AppendBatch (version 1) carries Key and Count only, every access a
// read; the partial-count batch (AppendPartials) carries every field.
type KeyCount struct {
	Key   string
	Count uint64 // accesses, reads and writes
	// Writes is how many of the Count accesses were writes (<= Count).
	Writes uint64
	// Bytes is the size of the values of the Count accesses, summed, of
	// which WriteBytes (<= Bytes) were written; 0 when not known.
	Bytes, WriteBytes uint64
}

// Event is one access event to encode as JSON with AppendJSON.
type Event struct {
	App   string // "" means "default" (the field is left out)
	Key   string
	Count uint64 // 0 or 1: the field is left out (the decoder's default is 1)
	TS    int64  // Unix milliseconds; <= 0 leaves the field out
	Bytes uint64 // bytes the Count accesses moved in total; 0 leaves the field out
	Op    Op     // OpRead leaves the field out
}

// DefaultApp is the app of an access event that names none.
const DefaultApp = "default"

var defaultApp = [len(DefaultApp)]byte{'d', 'e', 'f', 'a', 'u', 'l', 't'}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
