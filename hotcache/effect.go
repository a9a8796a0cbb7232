package hotcache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// Source and effect. The Client reports under its instance name (the source
// of its batches) and, every effect interval, what its caches did with the
// reads of each key in its hot table (the keys it serves from L1), so that
// Hotspot can tell whether a promotion took the key's reads off Redis and the
// source. Each Get of such a key counts in at most one of three classes, by
// the path it took in lookup and getHot:
//
//   - l1_hits: answered from the key's L1 value (fresh, or "not found"),
//     without a backend read: lookup's fast path;
//   - l2_reads: L1 had no fresh value and the Get's answer came from a
//     backend read of the key that read Redis, hit, miss or error alike
//     (the single flight the Get started or joined: a promotion load, a
//     refresh, another Get's read);
//   - limited: refused before any backend read: the hot-read bucket refused
//     it (it is then answered with the stale L1 value, the WithFallback
//     answer or ErrThrottled), or its read skipped Redis and the Loader
//     bucket refused the load;
//
// and source_loads counts the Gets whose answer came from a backend read
// that called the Loader: after a Redis miss or error (a subset of
// l2_reads), or without a Redis read (no Redis, breaker open, or an
// invalidation pending for the key). A Get in none of the three classes
// missed L1 and gave up (its context ended) before the read answered, or its
// read failed before reaching Redis or the Loader.
//
// Counting stays off the fast path: an L1 hit costs nothing beyond the access
// count the hot entry already keeps (stripedCount). A Get that misses L1 adds
// its class to the entry's effectCount before its access count, and the
// reporter derives the L1 hits of each 100 ms access drain as the key's
// reads less those misses (drainHot).

// effectOutcome is what a Get that L1 did not answer did (bits).
type effectOutcome uint8

const (
	effL2      effectOutcome = 1 << iota // its answer came from a read that read Redis
	effSource                            // ... that called the Loader
	effLimited                           // a token bucket refused it before any backend read
)

// outcomeOf classifies a Get by what the backend read that answered it did.
func outcomeOf(tr fetchTrace) effectOutcome {
	var out effectOutcome
	switch {
	case tr.redis:
		out = effL2
	case tr.limited:
		out = effLimited
	}
	if tr.loader {
		out |= effSource
	}
	return out
}

// fetchTrace is what one backend read of a key did (fetch fills it in).
type fetchTrace struct {
	redis   bool // it read Redis (a replica or the owner): hit, miss or error
	loader  bool // it called the Loader
	limited bool // the Loader bucket refused its load
}

// effectCount counts the Gets of a hot key that L1 did not answer, by
// outcome, since the reporter last took them. It sits in the key's hotEntry:
// no lookup, no allocation; only misses touch it.
type effectCount struct {
	misses, l2, source, limited atomic.Uint64
}

func (c *effectCount) add(out effectOutcome, w uint64) {
	c.misses.Add(w)
	if out&effL2 != 0 {
		c.l2.Add(w)
	}
	if out&effSource != 0 {
		c.source.Add(w)
	}
	if out&effLimited != 0 {
		c.limited.Add(w)
	}
}

// take returns what c counted and resets it.
func (c *effectCount) take() (misses uint64, ec wire.EffectCounts) {
	swap := func(a *atomic.Uint64) uint64 {
		if a.Load() == 0 {
			return 0 // no write: most entries see no miss
		}
		return a.Swap(0)
	}
	return swap(&c.misses), wire.EffectCounts{L2Reads: swap(&c.l2), SourceLoads: swap(&c.source), Limited: swap(&c.limited)}
}

// effectAcc is a hot entry's effect since the last effect report. Only the
// reporter's goroutine reads or writes it (drainHot, takeEffects). l1 is
// signed: a Get that misses L1 adds its miss before its read count, so a
// drain between the two sees the miss without the read (l1 one short) and
// the next drain the read without the miss; the sum is right once both are
// in.
type effectAcc struct {
	l1                  int64
	l2, source, limited uint64
	pending             bool // some count since the last report
}

// accumulate adds to e's effect the reads n that the access drain just took
// from e.hits, less the misses counted since the last drain.
func (e *hotEntry) accumulate(n uint64) {
	misses, ec := e.eff.take()
	if n == 0 && misses == 0 {
		return
	}
	a := &e.acc
	a.l1 += int64(n) - int64(misses)
	a.l2 += ec.L2Reads
	a.source += ec.SourceLoads
	a.limited += ec.Limited
	a.pending = true
}

// takeEffect returns e's effect since the last report and resets it
// (keeping a negative l1, which the next drain makes up).
func (e *hotEntry) takeEffect() (wire.EffectCounts, bool) {
	a := &e.acc
	if !a.pending {
		return wire.EffectCounts{}, false
	}
	ec := wire.EffectCounts{L1Hits: uint64(max(a.l1, 0)), L2Reads: a.l2, SourceLoads: a.source, Limited: a.limited}
	*a = effectAcc{l1: min(a.l1, 0)}
	return ec, true
}

// countHotMiss counts a Get of hot key e that L1 did not answer and that
// served size bytes, with its outcome. A sampled-out Get is left out of both
// counts, so the L1 hits derived from them stay those of the sample.
func (c *Client) countHotMiss(e *hotEntry, size int, out effectOutcome) {
	w := uint64(1)
	if n := c.o.reportSample; n > 1 {
		if rand.Uint32()%uint32(n) != 0 {
			return
		}
		w = uint64(n)
	}
	e.eff.add(out, w) // before the read count: see effectAcc
	e.hits.add(w, w*uint64(size))
}

// takeEffects appends the effect of every key that was hot since the last
// call (those still hot and those demoted since) that had any count, and
// resets them; a key demoted and promoted again comes once. Only the
// reporter's goroutine calls it, after a drainHot.
func (c *Client) takeEffects(dst []wire.Effect) []wire.Effect {
	for k, e := range c.hot.Load().m {
		if ec, ok := e.takeEffect(); ok {
			dst = append(dst, wire.Effect{Key: k, EffectCounts: ec})
		}
	}
	if len(c.effRetired) == 0 {
		return dst
	}
	at := make(map[string]int, len(dst)+len(c.effRetired))
	for i, ef := range dst {
		at[ef.Key] = i
	}
	for _, e := range c.effRetired {
		ec, ok := e.takeEffect()
		if !ok {
			continue
		}
		if i, dup := at[e.key]; dup {
			d := &dst[i].EffectCounts
			d.L1Hits += ec.L1Hits
			d.L2Reads += ec.L2Reads
			d.SourceLoads += ec.SourceLoads
			d.Limited += ec.Limited
			continue
		}
		at[e.key] = len(dst)
		dst = append(dst, wire.Effect{Key: e.key, EffectCounts: ec})
	}
	clear(c.effRetired)
	c.effRetired = c.effRetired[:0]
	return dst
}

// Instance returns the name this Client reports under (WithInstanceID).
func (c *Client) Instance() string { return c.instance }

// defaultInstance is "<host name>/<pid>", or "pid-<pid>" when the host name
// is unknown.
func defaultInstance(hostname func() (string, error), pid int) string {
	if h, err := hostname(); err == nil && h != "" && validInstance(h+"/"+strconv.Itoa(pid)) == nil {
		return h + "/" + strconv.Itoa(pid)
	}
	return "pid-" + strconv.Itoa(pid)
}

// validInstance checks an instance name, after the default.
func validInstance(name string) error {
	switch {
	case name == "":
		return errors.New("hotcache: WithInstanceID: empty instance name")
	case len(name) > wire.DefaultMaxKeyLen:
		return fmt.Errorf("hotcache: WithInstanceID: name of %d bytes, at most %d", len(name), wire.DefaultMaxKeyLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("hotcache: WithInstanceID: name %q is not valid UTF-8", name)
	}
	return nil
}
