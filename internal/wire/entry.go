package wire

import "github.com/hotspot-dev/hotspot/access"

// The access-event types are the public contract's (package access); the
// codecs here speak them under these names.
type (
	Entry = access.Entry // one decoded access
	Op    = access.Op    // the kind of access an event records
)

// Aliases of package access's constants.
const (
	OpRead           = access.OpRead
	OpWrite          = access.OpWrite
	DefaultMaxKeyLen = access.DefaultMaxKeyLen
	DefaultApp       = access.DefaultApp
)

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
