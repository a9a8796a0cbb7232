// Package itemdb is the example app's database (cmd/itemapp): items
// "item:0" to "item:N-1", each read after a fixed latency and counted, so
// that a demo can show how many reads the cache spared the source.
package itemdb

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DB is a simulated source of truth, shaped as hotcache's Loader and Writer.
type DB struct {
	latency  time.Duration
	n        int
	notFound error
	reads    atomic.Int64
	mu       sync.Mutex        // guards written
	written  map[string][]byte // overrides by Write; nil value: deleted
}

// New returns a DB whose items 0..n-1 exist and whose every read takes
// latency. Load answers a missing key with notFound (the cache's own
// hotcache.ErrNotFound, so that the cache remembers the key is missing).
func New(n int, latency time.Duration, notFound error) *DB {
	return &DB{latency: latency, n: n, notFound: notFound, written: map[string][]byte{}}
}

// Reads returns how many loads reached the DB.
func (db *DB) Reads() int64 { return db.reads.Load() }

// Latency returns the time a read takes.
func (db *DB) Latency() time.Duration { return db.latency }

// Load returns key's value after the read latency, or New's notFound.
func (db *DB) Load(ctx context.Context, key string) ([]byte, error) {
	db.reads.Add(1)
	if db.latency > 0 {
		t := time.NewTimer(db.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	db.mu.Lock()
	v, ok := db.written[key]
	db.mu.Unlock()
	if ok {
		if v == nil {
			return nil, db.notFound
		}
		return v, nil
	}
	id, found := itemID(key)
	if !found || id >= db.n {
		return nil, db.notFound
	}
	return fmt.Appendf(nil, `{"id":%d,"name":"item %d"}`, id, id), nil
}

// Write sets key's value.
func (db *DB) Write(ctx context.Context, key string, value []byte) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.written[key] = value
	return nil
}

// Delete removes key: later loads find nothing.
func (db *DB) Delete(ctx context.Context, key string) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.written[key] = nil
	return nil
}

// itemID returns N of "item:N".
func itemID(key string) (int, bool) {
	const p = "item:"
	if len(key) <= len(p) || key[:len(p)] != p {
		return 0, false
	}
	id, err := strconv.Atoi(key[len(p):])
	return id, err == nil && id >= 0
}
