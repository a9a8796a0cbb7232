package hotcache

import (
	"sync"

	"github.com/bits-and-blooms/bloom/v3"
)

// bloomFilter guards a bloom.BloomFilter, which is not safe for concurrent
// Add and Test.
type bloomFilter struct {
	mu sync.RWMutex // guards f
	f  *bloom.BloomFilter
}

func (b *bloomFilter) test(key string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.f.TestString(key)
}

func (b *bloomFilter) add(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.f.AddString(key)
}
