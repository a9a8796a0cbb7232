package aggregator

import (
	"time"

	"github.com/hotspot-dev/hotspot/rules"
)

// resolved is one rule of an app in the table's units. Every entry that
// follows the rule points to it; it never changes once built.
type resolved struct {
	rs      *ruleSet // the set it belongs to: an entry whose rule is not in its app's set is stale
	eff     rules.Effective
	kind    string
	buckets int     // window length in buckets
	winSec  float64 // window length in seconds (buckets * Bucket)
	window  time.Duration
	hotSum  float64 // window total at which a threshold key turns hot
	lowSum  float64 // window total under which a hot key's hold runs
}

// quantity is what the rule counts of a tally: accesses or their bytes, of
// reads, writes or both.
func (r *resolved) quantity(c tally) uint64 {
	if r.eff.Measure == rules.Bytes {
		switch r.eff.Ops {
		case rules.Read:
			return c.bytes - min(c.writeBytes, c.bytes)
		case rules.Write:
			return c.writeBytes
		}
		return c.bytes
	}
	switch r.eff.Ops {
	case rules.Read:
		return c.n - min(c.writes, c.n)
	case rules.Write:
		return c.writes
	}
	return c.n
}

// sameQuantity reports whether r and o count the same thing, so that a
// window of one can be read under the other.
func (r *resolved) sameQuantity(o *resolved) bool {
	return r.eff.Measure == o.eff.Measure && r.eff.Ops == o.eff.Ops
}

// ruleSet is an app's compiled rules resolved in the table's units.
type ruleSet struct {
	set  *rules.Set
	def  *resolved
	rule []*resolved // by index
	topk []int       // indexes of the top-K rules
}

// newRuleSet resolves s (nil: the table's default rule only).
func (t *table) newRuleSet(s *rules.Set) *ruleSet {
	if s == nil {
		s = t.defSet
	}
	rs := &ruleSet{set: s, rule: make([]*resolved, s.Len())}
	rs.def = t.resolve(rs, s.Default())
	for i := range rs.rule {
		rs.rule[i] = t.resolve(rs, s.Rule(i))
		if rs.rule[i].eff.Mode == rules.TopK {
			rs.topk = append(rs.topk, i)
		}
	}
	return rs
}

// resolve turns eff into the table's units. A window that is not a whole
// number of Buckets is rounded to the nearest (at least one).
func (t *table) resolve(rs *ruleSet, eff rules.Effective) *resolved {
	n := max(1, (int64(eff.Window)+t.p.bucketNs/2)/t.p.bucketNs)
	w := time.Duration(n * t.p.bucketNs)
	r := &resolved{rs: rs, eff: eff, kind: string(eff.Kind()), buckets: int(n), winSec: w.Seconds(), window: w}
	r.hotSum = eff.Threshold * r.winSec
	r.lowSum = eff.Low * r.hotSum
	return r
}

// match returns the rule of key.
func (rs *ruleSet) match(key string) *resolved {
	eff := rs.set.Match(key)
	if eff.Index < 0 || eff.Index >= len(rs.rule) {
		return rs.def
	}
	return rs.rule[eff.Index]
}

// rulesOf returns app's rules. The caller holds t.mu.
func (t *table) rulesOf(app string) *ruleSet {
	if rs := t.sets[app]; rs != nil {
		return rs
	}
	return t.defRules
}

// resolveChunk is how many entries a rule change re-resolves per hold of
// the table lock: small enough that intake waits a few milliseconds at most.
const resolveChunk = 512

// SetRules makes s the rules of app's keys (nil: the default rule built
// from Config's Threshold, Window, Hold and LowMark, which every app has
// until SetRules is called). Every key of the app the shard tracks is
// re-resolved before SetRules returns, a chunk at a time so that partials
// keep flowing meanwhile; keys that arrive later are resolved on arrival. A
// key whose rule keeps its measure and ops keeps the counts still inside its
// new window; one whose measure or ops change starts an empty window. It is
// safe to call from any goroutine; a later call supersedes an earlier one
// still running.
func (a *Aggregator) SetRules(app string, s *rules.Set) {
	a.t.setRules(app, s, time.Now)
	a.wake()
}

// setRules is SetRules on the clock now.
func (t *table) setRules(app string, s *rules.Set, clock func() time.Time) {
	t.mu.Lock()
	rs := t.newRuleSet(s)
	if s == nil {
		delete(t.sets, app)
	} else {
		t.sets[app] = rs
	}
	as := t.apps[app]
	if as != nil {
		as.rs = rs
	}
	t.mu.Unlock()
	if as == nil {
		return
	}
	// Entries move within t.entries when others are removed between two
	// chunks, so one pass may miss some: passes repeat until one finds
	// none stale (the second is usually a cheap scan).
	for {
		stale := 0
		for i := 0; ; {
			t.mu.Lock()
			if t.apps[app] != as || as.rs != rs {
				t.mu.Unlock()
				return // superseded, or the app was forgotten
			}
			now := clock()
			b := t.bucket(now)
			t.setReach(now)
			end := min(i+resolveChunk, len(t.entries))
			for ; i < end; i++ {
				if e := t.entries[i]; e.app == as && e.r.rs != rs {
					t.reresolve(e, rs.match(e.key), b, now)
					stale++
				}
			}
			// Longer windows may have taken the table past MaxBytes:
			// the coldest keys leave, as for a newcomer. Entries evicted
			// before i move others before i: the next pass finds them.
			t.trimBytes(b)
			done := i >= len(t.entries)
			t.mu.Unlock()
			if done {
				break
			}
		}
		if stale == 0 {
			return
		}
	}
}

// reresolve moves e to rule r after its app's rules changed. The caller
// holds t.mu.
func (t *table) reresolve(e *entry, r *resolved, b int64, now time.Time) {
	old, cost := e.r, bytesOf(e)
	e.r = r
	e.win.advance(b)
	switch {
	case !old.sameQuantity(r):
		// The window counted another quantity: start empty. A hot key
		// gets one window of grace, as a restored key does, so that it is
		// judged on a full window of the new quantity.
		e.win = t.newWindow(b, r)
		e.seed = 0
		if e.hot {
			e.holdFrom, e.below = now.Add(r.window), time.Time{}
		}
	case old.buckets != r.buckets:
		e.win.resize(t.ringSize(r), r.buckets)
	}
	t.grew(bytesOf(e) - cost)
	if !e.hot {
		t.check(e, b, now) // a lower threshold may make it hot now
		return
	}
	e.app.dirty = true // its rule and kind are published
	if r.eff.Mode == rules.Never {
		t.demote(e, now)
	}
}
