package hotcache

// KeyFilter is a set of the keys that exist, kept approximately, typically a
// Bloom filter: a Get of a key it rules out is answered with ErrNotFound
// without any backend read (WithBloomFilter). hotcache/bloomfilter adapts a
// github.com/bits-and-blooms/bloom/v3 filter; any other (a cuckoo filter, an
// exact set) satisfies it with two methods.
//
// The Client calls both methods from many goroutines at once: an
// implementation must be safe for concurrent use.
type KeyFilter interface {
	// MayContain reports whether key may exist. It may answer true for a
	// key that does not (a false positive, which costs a backend read),
	// but must never answer false for a key that was added: that key
	// would read as not found.
	MayContain(key string) bool
	// Add records that key exists.
	Add(key string)
}
