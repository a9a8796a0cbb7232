package hotcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Invalidations that could not land.
//
// Set, Delete, Invalidate and InvalidatePrefix mark the key (or prefix)
// pending before they drop it anywhere, and unmark it once Redis has deleted
// it and the broadcast has gone out. Marked keys are what make the writer
// consistent through a Redis outage:
//   - While a key is pending, this instance never reads it from Redis (whose
//     copy may be older than the write); it goes to the Loader and writes
//     nothing back. So no instance reinstates a value older than a write it
//     has seen: the writer because of this, the others because they drop the
//     key only when the broadcast reaches them, after Redis's copy is gone.
//   - One goroutine retries pending invalidations every retryEvery, past the
//     circuit breaker (it is one caller, at a bounded pace), so they land
//     within retryEvery plus one Redis round trip of Redis answering again.
//     A success closes the breaker.
//   - At most pendingMax keys and prefixes wait (WithInvalidationQueue,
//     default 10,000); past that an invalidation is dropped, counted in
//     invalidations_dropped_total and logged, and the old value lives until
//     the Redis TTL and, in other instances' L1, until the L1 TTL.
//   - Close tries the queue once more; what still fails is logged and lost.

// ErrWriteFailed means the Loader's Writer failed: the source of truth is
// unchanged (as far as the Writer tells) and nothing was invalidated.
var ErrWriteFailed = errors.New("hotcache: write failed")

// ErrNotInvalidated means the source of truth was written (or, for
// Invalidate, nothing needed writing) but Redis could not be invalidated yet.
// The invalidation is queued and retried in the background unless the queue
// was full; the error says which.
var ErrNotInvalidated = errors.New("hotcache: written but not invalidated yet")

const retryEvery = 100 * time.Millisecond

// WithInvalidationQueue bounds how many keys and prefixes whose invalidation
// failed wait to be retried (default 10,000).
func WithInvalidationQueue(n int) Option { return func(o *options) { o.pendingMax = n } }

// pendingItem is a key, or with prefix set every key that starts with it.
type pendingItem struct {
	s      string
	prefix bool
}

type pendingSet struct {
	max  int
	wake chan struct{} // one buffered slot: the retrier has work

	n        atomic.Int32 // len(items), read without the lock on every fetch
	prefixes atomic.Int32 // prefix items in items

	mu    sync.Mutex // guards items and seq
	items map[pendingItem]pendingState
	seq   uint64
}

type pendingState struct {
	seq    uint64 // changes each time the item is marked again
	failed bool   // the first attempt failed: the retrier owns it
}

func newPendingSet(max int) *pendingSet {
	return &pendingSet{max: max, wake: make(chan struct{}, 1), items: map[pendingItem]pendingState{}}
}

// mark adds it (again) and returns its sequence number, or false if the set
// is full and it was not in it.
func (p *pendingSet) mark(it pendingItem) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.items[it]
	if !ok && len(p.items) >= p.max {
		return 0, false
	}
	p.seq++
	st.seq = p.seq
	if !ok && it.prefix {
		p.prefixes.Add(1)
	}
	p.items[it] = st
	p.n.Store(int32(len(p.items)))
	return st.seq, true
}

// failed hands it to the retrier.
func (p *pendingSet) failed(it pendingItem) {
	p.mu.Lock()
	if st, ok := p.items[it]; ok {
		st.failed = true
		p.items[it] = st
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// done removes it if it was not marked again since seq.
func (p *pendingSet) done(it pendingItem, seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.items[it]; ok && st.seq == seq {
		delete(p.items, it)
		if it.prefix {
			p.prefixes.Add(-1)
		}
		p.n.Store(int32(len(p.items)))
	}
}

// covers reports whether key's invalidation is pending.
func (p *pendingSet) covers(key string) bool {
	if p.n.Load() == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.items[pendingItem{s: key}]; ok {
		return true
	}
	if p.prefixes.Load() > 0 {
		for it := range p.items {
			if it.prefix && len(key) >= len(it.s) && key[:len(it.s)] == it.s {
				return true
			}
		}
	}
	return false
}

// failedItems returns the items the retrier owns, with their sequence numbers.
func (p *pendingSet) failedItems() map[pendingItem]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[pendingItem]uint64{}
	for it, st := range p.items {
		if st.failed {
			out[it] = st.seq
		}
	}
	return out
}

// retryPending retries failed invalidations until Close, then once more.
func (c *Client) retryPending() {
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	for {
		select {
		case <-c.bg.Done():
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.bg), 2*c.o.opTimeout)
			defer cancel()
			c.retryOnce(ctx)
			if n := c.pending.n.Load(); n > 0 {
				c.log.Warn("hotcache: invalidations not landed at Close", "pending", n)
			}
			return
		case <-tick.C:
		case <-c.pending.wake:
		}
		if c.pending.n.Load() > 0 {
			c.retryOnce(c.bg)
		}
	}
}

// retryOnce tries every failed item once; it stops at the first failure
// (Redis is still down: the rest would fail too).
func (c *Client) retryOnce(ctx context.Context) {
	for it, seq := range c.pending.failedItems() {
		var err error
		if it.prefix {
			_, err = c.deletePrefix(ctx, it.s)
		} else {
			err = c.delAndPublishKey(ctx, it.s)
		}
		if err != nil {
			c.log.Debug("hotcache: invalidation retry failed", "key", it.s, "prefix", it.prefix, "err", err)
			return
		}
		c.br.success() // Redis answers again: no need to wait for the breaker's probe
		c.pending.done(it, seq)
		c.m.pendingRetried.Inc()
		c.secondDelete(it)
	}
}
