package routecache

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Store is the source of truth: the routing table in the app's database.
type Store interface {
	// Route returns shop's stored value (v1 or v2), or an error wrapping
	// hotcache.ErrNotFound.
	Route(ctx context.Context, shop string) ([]byte, error)
	// AddShards ORs shards into shop's bitmap, creating the shop if needed.
	// Adding shards it has is a no-op: order events may be delivered twice.
	AddShards(ctx context.Context, shop string, shards Shards) error
	// Shops lists every shop, for the Bloom filter and for warm-ups.
	Shops(ctx context.Context) ([]string, error)
}

// MemStore is an in-memory Store standing in for the database, with a
// counter of reads. Safe for concurrent use.
type MemStore struct {
	mu     sync.Mutex // guards routes
	routes map[string][]byte
	Reads  atomic.Int64
	Writes atomic.Int64
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{routes: map[string][]byte{}} }

// Put stores a raw value (v1 or v2) for shop, as an old deployment wrote it.
func (m *MemStore) Put(shop string, value []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routes[shop] = value
}

// Route implements Store.
func (m *MemStore) Route(ctx context.Context, shop string) ([]byte, error) {
	m.Reads.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.routes[shop]
	if !ok {
		return nil, fmt.Errorf("shop %q: %w", shop, errNotFound)
	}
	return v, nil
}

// AddShards implements Store; it rewrites the value as v2.
func (m *MemStore) AddShards(ctx context.Context, shop string, shards Shards) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := Shards{}
	if v, ok := m.routes[shop]; ok {
		var err error
		if cur, err = Decode(v); err != nil {
			return fmt.Errorf("shop %q: %w", shop, err)
		}
	}
	next := cur.Or(shards)
	if next.Equal(cur) {
		if _, ok := m.routes[shop]; ok {
			return nil
		}
	}
	m.Writes.Add(1)
	m.routes[shop] = Encode(next)
	return nil
}

// Replace sets every shop's route at once (a migration's new layout).
func (m *MemStore) Replace(routes map[string]Shards) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routes = map[string][]byte{}
	for shop, s := range routes {
		m.routes[shop] = Encode(s)
	}
	m.Writes.Add(1)
}

// Shops implements Store.
func (m *MemStore) Shops(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.routes)), nil
}
