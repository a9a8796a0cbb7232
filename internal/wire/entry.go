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
	Src   []byte // who made the accesses (an app instance, a client address); empty when not given
}

// EffectCounts are what the apps' caches did with the reads of one hot key
// over a period: reads answered from the L1 (in-process memory), reads that
// went to the L2 (Redis), loads from the source behind it (a subset of
// those whose L2 missed), and reads the per-instance rate limit refused.
type EffectCounts struct {
	L1Hits, L2Reads, SourceLoads, Limited uint64
}

// Effect is one key's entry of an effect batch being encoded.
type Effect struct {
	Key string
	EffectCounts
}

// EffectEntry is one decoded effect report: what one instance (Src) of App
// did with Key's reads over the Period milliseconds that ended at End (Unix
// milliseconds; 0: not given, use the record's timestamp). App, Src and Key
// alias the record and are valid only during the callback.
type EffectEntry struct {
	App, Src, Key []byte
	End, Period   int64
	EffectCounts
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
	Src   string // "" leaves the field out
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
