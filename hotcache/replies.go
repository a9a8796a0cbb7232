package hotcache

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Serving hot keys for a proxy (cmd/hotspot-proxy). A proxy answers Redis
// commands for clients it did not write: it needs the hot set, the L1, the
// hot-read bucket, the reporter and the invalidation broadcast of a Client,
// but it reads what a client asked on that client's own Redis connection,
// and it caches whole encoded replies, one per command variant (command,
// arguments, protocol version), beside the key's value. This file is that
// surface; nothing in it changes the cost of Get.
//
//   - LookupHot serves a hot key's value as Get does, and says when the key is
//     not hot (or has no value) so that the caller reads it itself.
//   - A ReplyCache holds encoded replies of hot keys: a reply lives as long as
//     the key's L1 entry and its generation (an invalidation, local or
//     received, drops it with the key's value), for at most the L1 TTL.
//   - ReportRead and ReportWrite count accesses the caller served itself.
//   - Broadcast drops a key in every instance's L1 without touching Redis:
//     for a caller whose own write has just set the key there.

// HotState says what LookupHot or ReplyCache.Get did.
type HotState uint8

const (
	// NotHot: the key is not served from L1 here; the caller reads it and
	// reports the read (ReportRead).
	NotHot HotState = iota
	// HotHit: answered from L1 (counted as the key's L1 hit).
	HotHit
	// HotMiss: the key is hot but L1 had no answer; the caller reads it on
	// its own connection (a token of the hot-read bucket was taken) and hands
	// the answer to ReplyCache.Put, which counts it.
	HotMiss
	// HotLimited: the key is hot, L1 had no answer and the hot-read bucket
	// refused a backend read: answer with a blank (counted as limited).
	HotLimited
	// HotNotFound: LookupHot only: the key is hot and its L1 value says "not
	// found", or that Redis holds another type than a string under it
	// (WRONGTYPE); nothing was counted. A proxy asks its ReplyCache instead.
	HotNotFound
)

// LookupHot returns a hot key's value as Get would (from L1, else one backend
// read per key at a time within the hot-read bucket), counting the access,
// but only for a key in this instance's hot table: for any other key it
// returns NotHot at once and reads nothing. A key whose L1 value is "not
// found" gives HotNotFound and is not counted. A refused read gives
// HotLimited and ErrThrottled; another failed read its error (counted as a
// read that reached Redis).
func (c *Client) LookupHot(ctx context.Context, key string) ([]byte, HotState, error) {
	if c.closed.Load() {
		return nil, NotHot, ErrClosed
	}
	e := c.hot.Load().m[key]
	if e == nil {
		return nil, NotHot, nil
	}
	if v := e.val.Load(); v != nil && !v.stale {
		if v.notFound || v.err != nil {
			return nil, HotNotFound, nil
		}
		c.countHot(e, len(v.data))
		return v.data, HotHit, nil
	}
	data, _, out, err := c.getHot(ctx, e)
	switch {
	case errors.Is(err, ErrNotFound) || wrongType(err):
		c.countHotMiss(e, 0, out)
		return nil, HotNotFound, nil
	case errors.Is(err, ErrThrottled):
		c.countHotMiss(e, 0, out)
		return nil, HotLimited, err
	case err != nil:
		c.countHotMiss(e, 0, out)
		return nil, HotMiss, err
	}
	c.countHotMiss(e, len(data), out)
	if out&effL2 == 0 && out&effSource == 0 {
		return data, HotHit, nil // a stale value served while its reload was refused
	}
	return data, HotMiss, nil
}

// ReportRead counts one read of key that served bytes bytes, which the caller
// answered itself (from Redis): for a hot key it counts as a read that
// reached Redis in the key's effect.
func (c *Client) ReportRead(key string, bytes int) {
	if e := c.hot.Load().m[key]; e != nil {
		c.countHotMiss(e, bytes, effL2)
		return
	}
	c.countCold(key, bytes)
}

// ReportWrite counts one write of key of bytes bytes that the caller made
// itself. Writes are never sampled.
func (c *Client) ReportWrite(key string, bytes int) {
	if c.closed.Load() {
		return
	}
	c.countWrite(key, bytes)
}

// Broadcast drops key from this instance's L1 (its value and every cached
// reply) and publishes its invalidation on the app's channel, so that every
// instance, SDK or proxy, drops it too. Unlike Invalidate it does not delete
// the key in Redis: use it after a write that has just set the key there.
// It does delete the hot-key copies (WithRedisReplicas) other than the
// key's own first: an instance that reloads the key, this one included,
// must not find the old value there. Without Redis it only drops locally. A
// failed delete or publish is returned (wrapping ErrUnavailable) and not
// retried: other instances then keep their copy for at most the L1 TTL.
func (c *Client) Broadcast(ctx context.Context, key string) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if c.rdb == nil {
		c.dropLocal(key)
		return nil
	}
	if c.rep != nil {
		dctx, cancel := context.WithTimeout(c.redisCtx(ctx), c.o.opTimeout)
		err := c.rep.delCopies(dctx, key)
		cancel()
		if err != nil {
			c.dropLocal(key)
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	c.dropLocal(key)
	return c.publish(ctx, c.channel, key)
}

// DropLocal drops key from this instance's L1 (its value and every cached
// reply) without telling anyone: a hot key is reloaded at once, and a load
// or reply read that started before the drop is not kept.
func (c *Client) DropLocal(key string) {
	if !c.closed.Load() {
		c.dropLocal(key)
	}
}

// ReplyCache holds encoded replies of hot keys, each under a variant that the
// caller names (a proxy: the protocol version, the command and its
// arguments), within a byte budget of its own. A reply is kept as long as its
// key stays in the Client's hot table with the generation it had when the
// read started: a demotion or an invalidation (a Set, a Broadcast, a received
// broadcast) drops it with the key's value. A reply older than the L1 TTL is
// stale, and so is every reply read before the Client's invalidation
// subscription was lost (broadcasts may have been missed meanwhile, as for
// the L1's values): it is served only when the hot-read bucket refuses a new
// read. Safe for concurrent use.
type ReplyCache struct {
	c       *Client
	max     int64
	used    atomic.Int64
	seed    maphash.Seed
	stripes [replyStripes]replyStripe
	refused atomic.Uint64
}

const replyStripes = 16

type replyStripe struct {
	mu sync.Mutex
	m  map[string]*keyReplies
}

// keyReplies are the replies of one hot key, valid while e is the key's
// entry and its generation is gen.
type keyReplies struct {
	e    *hotEntry
	gen  uint64
	v    map[string]cachedReply
	size int64
}

type cachedReply struct {
	data   []byte
	at     time.Time
	missed uint64 // Client.missed when the read started
}

// ReplyTicket is a read in progress that ReplyCache.Get handed to its caller.
type ReplyTicket struct {
	key, variant string
	e            *hotEntry
	gen, missed  uint64
}

// Key is the key of the read t stands for.
func (t ReplyTicket) Key() string { return t.key }

// NewReplyCache returns a ReplyCache over c's hot set of at most maxBytes
// bytes of replies (keys and variants included).
func (c *Client) NewReplyCache(maxBytes int64) *ReplyCache {
	r := &ReplyCache{c: c, max: maxBytes, seed: maphash.MakeSeed()}
	for i := range r.stripes {
		r.stripes[i].m = map[string]*keyReplies{}
	}
	return r
}

func (r *ReplyCache) stripe(key string) *replyStripe {
	return &r.stripes[maphash.String(r.seed, key)%replyStripes]
}

// Get looks up key's reply under variant. HotHit returns the reply (to be
// neither modified nor kept past the answer); HotMiss a ticket for Put once
// the caller has read the reply itself; HotLimited means answer with a blank;
// NotHot means the key is not served from L1: read it and ReportRead it.
func (r *ReplyCache) Get(key, variant string) ([]byte, ReplyTicket, HotState) {
	c := r.c
	if c.closed.Load() {
		return nil, ReplyTicket{}, NotHot
	}
	e := c.hot.Load().m[key]
	if e == nil {
		return nil, ReplyTicket{}, NotHot
	}
	gen, missed := e.gen.Load(), c.missed.Load()
	var stale []byte
	s := r.stripe(key)
	s.mu.Lock()
	if kr := s.m[key]; kr != nil {
		if kr.e != e || kr.gen != gen {
			r.dropLocked(s, key, kr)
		} else if cr, ok := kr.v[variant]; ok {
			if cr.missed == missed && time.Since(cr.at) <= c.o.l1TTL {
				s.mu.Unlock()
				c.countHot(e, len(cr.data))
				return cr.data, ReplyTicket{}, HotHit
			}
			stale = cr.data
		}
	}
	s.mu.Unlock()
	if !c.hotLim.Allow() {
		if stale != nil {
			c.m.throttled.WithLabelValues("hot_stale").Inc()
			c.countHotMiss(e, len(stale), effLimited)
			return stale, ReplyTicket{}, HotHit
		}
		c.m.throttled.WithLabelValues("hot").Inc()
		c.countHotMiss(e, 0, effLimited)
		return nil, ReplyTicket{}, HotLimited
	}
	return nil, ReplyTicket{key: key, variant: variant, e: e, gen: gen, missed: missed}, HotMiss
}

// Put counts the read of t (a read that reached Redis, of len(reply) bytes)
// and keeps reply under t's variant, unless the key was demoted or
// invalidated since Get, or the budget is full. It keeps its own copy.
func (r *ReplyCache) Put(t ReplyTicket, reply []byte) {
	if t.e == nil {
		return
	}
	c := r.c
	c.countHotMiss(t.e, len(reply), effL2)
	size := int64(len(reply) + len(t.variant) + 64)
	if c.hot.Load().m[t.key] != t.e || t.e.gen.Load() != t.gen {
		return
	}
	s := r.stripe(t.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	kr := s.m[t.key]
	if kr != nil && (kr.e != t.e || kr.gen != t.gen) {
		if kr.gen > t.gen && kr.e == t.e {
			return // a newer generation's replies: this one is older
		}
		r.dropLocked(s, t.key, kr)
		kr = nil
	}
	if kr == nil {
		kr = &keyReplies{e: t.e, gen: t.gen, v: map[string]cachedReply{}, size: int64(len(t.key) + 64)}
		if r.used.Add(kr.size) > r.max {
			r.used.Add(-kr.size)
			r.refused.Add(1)
			return
		}
		s.m[t.key] = kr
	}
	if old, ok := kr.v[t.variant]; ok {
		size -= int64(len(old.data) + len(t.variant) + 64)
	}
	if r.used.Add(size) > r.max {
		r.used.Add(-size)
		r.refused.Add(1)
		return
	}
	kr.size += size
	kr.v[t.variant] = cachedReply{data: append([]byte(nil), reply...), at: time.Now(), missed: t.missed}
	// Checked again under the lock: an invalidation between the first check
	// and the store bumped the generation, and Get drops what it finds then.
}

func (r *ReplyCache) dropLocked(s *replyStripe, key string, kr *keyReplies) {
	delete(s.m, key)
	r.used.Add(-kr.size)
}

// Sweep frees the replies of keys that were demoted or invalidated since
// they were stored (Get frees those it comes across). Call it now and then,
// e.g. every second.
func (r *ReplyCache) Sweep() {
	t := r.c.hot.Load()
	for i := range r.stripes {
		s := &r.stripes[i]
		s.mu.Lock()
		for k, kr := range s.m {
			if t.m[k] != kr.e || kr.e.gen.Load() != kr.gen {
				r.dropLocked(s, k, kr)
			}
		}
		s.mu.Unlock()
	}
}

// ReplyStats are a ReplyCache's figures.
type ReplyStats struct {
	Keys    int   // keys with replies held
	Bytes   int64 // bytes held, against the budget
	Refused uint64
}

// Stats returns the cache's figures.
func (r *ReplyCache) Stats() ReplyStats {
	st := ReplyStats{Bytes: r.used.Load(), Refused: r.refused.Load()}
	for i := range r.stripes {
		s := &r.stripes[i]
		s.mu.Lock()
		st.Keys += len(s.m)
		s.mu.Unlock()
	}
	return st
}
