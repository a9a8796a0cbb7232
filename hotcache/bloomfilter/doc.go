// Package bloomfilter adapts a github.com/bits-and-blooms/bloom/v3 filter to
// hotcache.KeyFilter, for hotcache.WithBloomFilter:
//
//	f := bloom.NewWithEstimates(1_000_000, 0.01)
//	// ... f.AddString every key that exists
//	c, err := hotcache.New(ctx, hotcache.WithBloomFilter(bloomfilter.Wrap(f)), ...)
//
// It keeps the bits-and-blooms type out of hotcache's own API: an app that
// uses another filter never imports it.
//
// Invariant: a Filter's methods are safe for concurrent use, which the
// wrapped filter's are not; the Filter owns it from Wrap on.
package bloomfilter
