package hotcache

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

// Instant local protection.
//
// Before Hotspot's global verdict arrives (a few hundred milliseconds), one
// instance hammering one key would send Redis a GET per single flight, tens
// of thousands a second. So each instance counts its own backend reads per
// key in fixed one-second windows; a key read more than the local limit
// (default 400) in one window is kept in this instance's memory for a short
// TTL (default 1 s) at once. A key so protected costs Redis at most about
// limit+1 reads per TTL from this instance. Invalidations drop protected
// values like every other local copy.

// WithLocalProtection sets how many backend reads of one key per second this
// instance makes before it keeps the key's value locally (default 400/s;
// NoLimit switches local protection off), and for how long it keeps it
// (default 1 s).
func WithLocalProtection(reads Rate, ttl time.Duration) Option {
	return func(o *options) {
		o.localRate = reads
		o.localTTL = ttl
	}
}

// FallbackFunc answers a Get that a limit refused (err wraps ErrThrottled)
// or that Redis could not serve (err wraps ErrUnavailable). What it returns
// is what Get returns; Lookup then reports Fallback.
type FallbackFunc func(ctx context.Context, key string, err error) ([]byte, error)

// WithFallback sets an answer for Gets refused by a token bucket or by a
// Redis outage, instead of ErrThrottled or ErrUnavailable: a default value, a
// blank page. fn must be fast; it runs on the caller's goroutine.
func WithFallback(fn FallbackFunc) Option { return func(o *options) { o.fallback = fn } }

const (
	guardStripes      = 16
	guardKeysPerShard = 4096 // keys counted per stripe and window; more are not counted
	guardMaxProtected = 10_000
)

// localGuard counts backend reads per key and holds the values of keys read
// too often.
type localGuard struct {
	limit uint32 // reads in one window that trigger protection; 0: off
	ttl   time.Duration
	seed  maphash.Seed

	stripes [guardStripes]struct {
		mu     sync.Mutex // guards window and counts
		window int64      // Unix second the counts belong to
		counts map[string]uint32
		_      [40]byte
	}

	mu        sync.RWMutex // guards protected
	protected map[string]localValue
}

type localValue struct {
	v       *value
	expires time.Time
}

func newLocalGuard(limit Rate, ttl time.Duration) *localGuard {
	g := &localGuard{ttl: ttl, seed: maphash.MakeSeed(), protected: map[string]localValue{}}
	if limit < NoLimit {
		g.limit = uint32(max(1, min(limit, 1<<31))) // below 1/s: protect from the second read on
	}
	for i := range g.stripes {
		g.stripes[i].counts = map[string]uint32{}
	}
	return g
}

// get returns key's protected value, if it has one that has not expired.
func (g *localGuard) get(key string, now time.Time) *value {
	if g.limit == 0 {
		return nil
	}
	g.mu.RLock()
	lv, ok := g.protected[key]
	g.mu.RUnlock()
	if !ok || now.After(lv.expires) {
		return nil
	}
	return lv.v
}

// read counts one backend read of key that returned v, and protects key if
// it was read more than the limit in the current second. It reports whether
// key is protected from now on.
func (g *localGuard) read(key string, v *value, now time.Time) bool {
	if g.limit == 0 {
		return false
	}
	s := &g.stripes[maphash.String(g.seed, key)%guardStripes]
	sec := now.Unix()
	s.mu.Lock()
	if s.window != sec {
		clear(s.counts)
		s.window = sec
	}
	n, ok := s.counts[key]
	if !ok && len(s.counts) >= guardKeysPerShard {
		s.mu.Unlock()
		return false
	}
	n++
	s.counts[key] = n
	s.mu.Unlock()
	if n <= g.limit {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.protected) >= guardMaxProtected {
		for k, lv := range g.protected {
			if now.After(lv.expires) {
				delete(g.protected, k)
			}
		}
		if len(g.protected) >= guardMaxProtected {
			return false
		}
	}
	g.protected[key] = localValue{v: v, expires: now.Add(g.ttl)}
	return true
}

// drop forgets key's protected value.
func (g *localGuard) drop(key string) {
	if g.limit == 0 {
		return
	}
	g.mu.Lock()
	delete(g.protected, key)
	g.mu.Unlock()
}

// dropPrefix forgets the protected values of every key with prefix.
func (g *localGuard) dropPrefix(prefix string) {
	if g.limit == 0 {
		return
	}
	g.mu.Lock()
	for k := range g.protected {
		if strings.HasPrefix(k, prefix) {
			delete(g.protected, k)
		}
	}
	g.mu.Unlock()
}

// validateProtection checks the limits: a limit is > 0 or NoLimit.
func (o *options) validateProtection() error {
	for _, r := range []struct {
		name string
		v    Rate
	}{{"WithHotReadLimit", o.hotRate}, {"WithLoaderLimit", o.loaderRate}, {"WithLocalProtection", o.localRate},
		{"WithBulkLimit", o.bulkRate}} {
		if !(r.v > 0) {
			return fmt.Errorf("hotcache: %s: %v must be > 0 (NoLimit switches it off)", r.name, float64(r.v))
		}
	}
	if o.warmSet && !(o.warmRate > 0) {
		return fmt.Errorf("hotcache: WithWarmLimit: %v must be > 0 (NoLimit switches it off)", float64(o.warmRate))
	}
	if o.localTTL <= 0 {
		return fmt.Errorf("hotcache: WithLocalProtection: TTL %v must be > 0", o.localTTL)
	}
	if o.pendingMax <= 0 {
		return fmt.Errorf("hotcache: WithInvalidationQueue: %d must be > 0", o.pendingMax)
	}
	if o.breakerFailures <= 0 || o.breakerOpen <= 0 || o.fallbackAge <= 0 {
		return fmt.Errorf("hotcache: WithBreaker: %d failures, open %v, fallback age %v: each must be > 0",
			o.breakerFailures, o.breakerOpen, o.fallbackAge)
	}
	return nil
}
