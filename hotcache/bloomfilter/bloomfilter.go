package bloomfilter

import (
	"sync"

	"github.com/bits-and-blooms/bloom/v3"
)

// Filter is a bits-and-blooms filter made safe for concurrent use. It
// satisfies hotcache.KeyFilter.
type Filter struct {
	mu sync.RWMutex // guards f: bloom.BloomFilter is not safe for concurrent Add and Test
	f  *bloom.BloomFilter
}

// Wrap returns f as a Filter, which owns it from then on: f must not be
// used directly afterwards.
func Wrap(f *bloom.BloomFilter) *Filter { return &Filter{f: f} }

// MayContain reports whether key may have been added: false means it never
// was.
func (b *Filter) MayContain(key string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.f.TestString(key)
}

// Add adds key.
func (b *Filter) Add(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.f.AddString(key)
}
