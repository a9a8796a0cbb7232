package hotcache

import (
	"maps"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/rules"
)

// onChange applies a change of the app's hot set: promoted keys enter the hot
// table at once (IsHot is true from here on) and their values are loaded in
// the background; demoted keys leave it with their values. A key hot by
// writes (kind "write") never enters it, and leaves it at once when a
// cached key turns into one: its reads go to Redis and the Loader as for a
// cold key (see cacheable). It runs on the watcher's goroutine and never
// blocks on I/O.
func (c *Client) onChange(ch hotwatch.Change) {
	if ch.App != c.o.app {
		return
	}
	var added []*hotEntry
	c.hotMu.Lock()
	next := maps.Clone(c.hot.Load().m)
	add := func(k hotset.Key) {
		if next[k.Key] == nil && cacheable(k) {
			e := &hotEntry{key: k.Key, promoted: ch.At}
			next[k.Key] = e
			added = append(added, e)
		}
	}
	removed := 0
	drop := func(key string) {
		if e := next[key]; e != nil {
			delete(next, key)
			c.retire(e)
			removed++
		}
	}
	for _, k := range ch.Added {
		add(k)
	}
	for _, k := range ch.Changed {
		if cacheable(k) {
			add(k) // e.g. write -> count: cached from now on
		} else {
			drop(k.Key) // count -> write: out of L1 now
		}
	}
	for _, k := range ch.Removed {
		drop(k)
	}
	c.hot.Store(&hotTable{m: next})
	c.hotMu.Unlock()
	c.m.promotions.Add(float64(len(added)))
	c.m.demotions.Add(float64(removed))
	for _, e := range added {
		c.enqueue(e)
	}
	if len(added)+removed > 0 {
		c.log.Debug("hotcache: hot set changed", "promoted", len(added), "demoted", removed)
	}
}

// cacheable reports whether a hot key may be served from L1. A key hot by
// writes may not: its value changes all the time, and every read of it
// must see the latest write, so its reads go on to Redis and the source
// (a write-hot key must reach its source). Count and bytes keys may.
func cacheable(k hotset.Key) bool { return k.Kind != string(rules.KindWrite) }

// demoteLocked removes keys from the hot table; c.hotMu is held.
func (c *Client) demoteLocked(keys []string) {
	next := maps.Clone(c.hot.Load().m)
	for _, k := range keys {
		if e := next[k]; e != nil {
			delete(next, k)
			c.retire(e)
		}
	}
	c.hot.Store(&hotTable{m: next})
}

// retire frees e's L1 bytes and hands its last counts to the reporter; c.hotMu is held.
func (c *Client) retire(e *hotEntry) {
	e.dead = true
	c.l1Used -= e.size
	e.size = 0
	e.val.Store(nil)
	c.retired = append(c.retired, e)
}

// drainHot hands the reporter the accesses counted in hot entries since the
// last report, and adds them to the entries' effect (effect.go): the reads
// less the L1 misses counted since the last drain are L1 hits. Retired
// entries wait in effRetired for the next effect report. A Get that loaded
// the table just before a demotion may count into a retired entry after it
// was drained: that access is not reported (at most a few per demotion).
// Only the reporter's goroutine calls it.
func (c *Client) drainHot(fn func(key string, t tally)) {
	var total uint64
	for k, e := range c.hot.Load().m {
		// The reads first, then the misses: a Get counts its miss before its
		// read, so no miss is taken before its read (effectAcc).
		n, bytes := e.hits.take()
		switch {
		case n > 0:
			fn(k, tally{reads: n, readBytes: bytes})
			total += n
		case bytes > 0:
			e.hits.add(0, bytes) // the bytes of a read whose count went with the last flush
		}
		e.accumulate(n)
	}
	c.hotMu.Lock()
	retired := c.retired
	c.retired = nil
	c.hotMu.Unlock()
	for _, e := range retired {
		n, bytes := e.hits.take()
		if n > 0 {
			fn(e.key, tally{reads: n, readBytes: bytes})
			total += n
		}
		e.accumulate(n)
		c.effRetired = append(c.effRetired, e)
	}
	c.m.l1Hits.Add(total)
}

// enqueue asks a load worker to (re)load e, without blocking; when the queue
// is full the refresher asks again on its next tick.
func (c *Client) enqueue(e *hotEntry) {
	select {
	case c.loadq <- e:
	default:
	}
}

// loadWorker loads promoted and due entries within the hot-read bucket.
func (c *Client) loadWorker() {
	for {
		select {
		case <-c.bg.Done():
			return
		case e := <-c.loadq:
			if !c.due(e, time.Now()) || e.loading.Load() {
				continue
			}
			if !c.hotLim.Allow() {
				c.m.throttled.WithLabelValues("refresh").Inc()
				continue // the refresher retries on its next tick
			}
			r, _, _ := c.sf.Do("\x00hot\x00"+e.key, func() (any, error) { return c.loadHot(e) })
			if h, ok := r.(hotLoad); ok && h.redo {
				// Invalidated, or marked stale, while it loaded (the
				// enqueue that came with it found it loading): load
				// again now, not at the refresher's next tick.
				c.enqueue(e)
			}
		}
	}
}

// due reports whether e needs a load: no value, a stale one, or past its refresh time.
func (c *Client) due(e *hotEntry, now time.Time) bool {
	v := e.val.Load()
	return v == nil || v.stale || now.UnixNano() >= e.refreshAt.Load()
}

// refresher marks values older than the L1 TTL stale and queues entries that
// are due for a load, so hot values are reloaded ahead of expiry (at 50-75%
// of the TTL, jittered per entry) and a missed promotion load is retried.
func (c *Client) refresher() {
	tick := time.NewTicker(min(c.o.l1TTL/10, 250*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-c.bg.Done():
			return
		case now := <-tick.C:
			for _, e := range c.hot.Load().m {
				v := e.val.Load()
				if v != nil && !v.stale && now.Sub(v.loaded) > c.o.l1TTL {
					s := *v
					s.stale = true
					e.val.CompareAndSwap(v, &s)
				}
				if c.due(e, now) && !e.loading.Load() {
					c.enqueue(e)
				}
			}
		}
	}
}

// dropLocal removes key's value from this instance's L1 and fallback cache.
// A hot key stays hot and is reloaded at once; a load that started before
// the drop does not install its (possibly old) value.
func (c *Client) dropLocal(key string) {
	c.invSeq.Add(1)
	c.recent.Del(key)
	c.guard.drop(key)
	e := c.hot.Load().m[key]
	if e == nil {
		return
	}
	c.hotMu.Lock()
	e.gen.Add(1)
	if !e.dead {
		c.l1Used -= e.size
		e.size = 0
		e.val.Store(nil)
		e.refreshAt.Store(0)
	}
	c.hotMu.Unlock()
	c.enqueue(e)
}

// markAllStale is used after invalidations may have been missed (the Pub/Sub
// connection was lost): every hot value is reloaded at once, and served
// meanwhile only if its reload is refused or fails; so is every reply a
// ReplyCache holds, when next asked for.
func (c *Client) markAllStale() {
	c.invSeq.Add(1)
	c.missed.Add(1)
	c.clearRecent()
	c.guard.dropPrefix("")
	// A load in flight may have read before what was missed: from here on
	// it installs nothing (install checks missed under hotMu), and its
	// worker loads again (hotLoad.redo).
	m := c.hot.Load().m
	c.hotMu.Lock()
	for _, e := range m {
		if v := e.val.Load(); v != nil && !v.stale {
			s := *v
			s.stale = true
			e.val.CompareAndSwap(v, &s)
		}
	}
	c.hotMu.Unlock()
	for _, e := range m {
		c.enqueue(e)
	}
}
