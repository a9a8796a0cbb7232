package aggregator

import (
	"math/rand/v2"
	"time"

	"github.com/hotspot-dev/hotspot/hotset/decision"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/rules"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// A key near its threshold gets what the shard knows of who sends it
// (keySources) and of what the apps' caches did with it (effectRing); other
// keys get nothing, so the cost is per key near the threshold, not per
// tracked key (docs/aggregator.md, "Sources" and "Effect").
//
// A key of a threshold rule is near once its evaluated window (or the one
// being filled after it) holds nearFraction of its threshold total, and
// stays near while it is hot or holds keepFraction, so that a key around
// the mark does not lose its state to every dip. A key of another rule is
// near while it is hot.
const (
	nearFraction = 0.5
	keepFraction = 0.4
	// nearSamples is how many keys with state a hot key that finds
	// MaxNearKeys reached compares: the coldest of them that is not hot
	// gives its state up.
	nearSamples = 8
)

// near is the state of a key near its threshold.
type near struct {
	idx int // position in table.nears
	src keySources
	eff *effectRing // nil until the first effect report
}

// isNear reports whether e holds frac of its threshold total, or is hot.
// The caller holds t.mu.
func (t *table) isNear(e *entry, frac float64) bool {
	if e.hot {
		return true
	}
	if e.r.eff.Mode != rules.Threshold {
		return false
	}
	mark := frac * e.r.hotSum
	if float64(e.win.sum) < mark {
		return false // the ring's total, every window's upper bound, is below: most keys stop here
	}
	sum := max(e.win.evalTo(t.evalEnd), e.win.leading(t.evalEnd))
	return float64(sum) >= mark
}

// tau is the time constant, in nanoseconds, of e's sources: its rule's
// window, at least a second (a round is 100 ms: a shorter one would
// remember a round or two).
func tau(e *entry) int64 { return int64(max(e.r.window, time.Second)) }

// near returns the tracked entry of (app, key) with its state, or nil. A
// key gets state when sources or an effect report arrive for it while it is
// near its threshold (isNear); its counts never touch it, so the keys of an
// app that sends neither cost nothing more. The caller holds t.mu.
func (t *table) near(app, key []byte) *entry {
	e := t.lookup(app, key)
	switch {
	case e == nil:
		return nil
	case e.near != nil, t.isNear(e, nearFraction) && t.addNear(e):
		return e
	}
	return nil
}

// addNear gives e its state when there is room, and reports whether it
// did. At MaxNearKeys a hot key takes the place of the coldest of a few
// sampled keys that are not hot; any other key gets none.
func (t *table) addNear(e *entry) bool {
	if len(t.nears) >= t.p.maxNear && !(e.hot && t.evictNear()) {
		return false
	}
	e.near = &near{idx: len(t.nears)}
	t.nears = append(t.nears, e)
	t.m.nearKeys.Set(float64(len(t.nears)))
	return true
}

// evictNear drops the state of the coldest of nearSamples sampled keys that
// are not hot, or, when the samples found only hot ones, of the coldest of
// all that are not hot, and reports whether there was one. (Hot keys are
// few and promotions rare: the scan is the exception.)
func (t *table) evictNear() bool {
	var victim *entry
	consider := func(e *entry) {
		if !e.hot && (victim == nil || heatOf(e) < heatOf(victim)) {
			victim = e
		}
	}
	for range nearSamples {
		consider(t.nears[rand.IntN(len(t.nears))])
	}
	if victim == nil {
		for _, e := range t.nears {
			consider(e)
		}
	}
	if victim == nil {
		return false
	}
	t.dropNear(victim)
	return true
}

// dropNear forgets e's state. The caller holds t.mu.
func (t *table) dropNear(e *entry) {
	i, last := e.near.idx, t.nears[len(t.nears)-1]
	t.nears[i] = last
	last.near.idx = i
	t.nears[len(t.nears)-1] = nil
	t.nears = t.nears[:len(t.nears)-1]
	e.near = nil
	t.m.nearKeys.Set(float64(len(t.nears)))
}

// lookup returns the tracked entry of (app, key), or nil. The caller holds
// t.mu.
func (t *table) lookup(app, key []byte) *entry {
	as := t.apps[string(app)]
	if as == nil {
		return nil
	}
	return as.keys[string(key)]
}

// keySources merges what a detector saw of (app, key)'s sources, received
// at now, into the key's state: its total accesses and busiest sources
// over the detector's rounds since it last sent them. It returns the
// sketch of the key's distinct sources still to merge (pendingSketch.merge,
// after the table lock is released); a key that has no state is not near
// its threshold here, and its sources are dropped (ok false). The caller
// holds t.mu.
func (t *table) keySources(app, key []byte, total uint64, top []wire.SourceCount, distinct []byte, now time.Time) (p pendingSketch, ok bool) {
	e := t.near(app, key)
	if e == nil {
		return p, false
	}
	tc := tau(e)
	e.near.src.merge(total, top, now.UnixNano(), tc)
	return pendingSketch{src: &e.near.src, b: distinct, now: now.UnixNano(), tau: tc}, len(distinct) > 0
}

// pendingSketch is a round's sketch of a key's distinct sources, to be
// merged into its state.
type pendingSketch struct {
	src      *keySources
	b        []byte // aliases the partials body
	now, tau int64
}

// merge merges p, counting it in sketches_rejected_total when it does not
// merge. It takes the sketches' lock only: a key whose state was dropped
// meanwhile merges it into state no longer read.
func (p pendingSketch) merge(m *metrics) {
	if !p.src.addDistinct(p.b, p.now, p.tau) {
		m.sketchesRejected.Inc()
	}
}

// effect counts one key's effect report in its app's totals and, when the
// key has state here, in its window. The caller holds t.mu.
func (t *table) effect(app, key []byte, c wire.EffectCounts, now time.Time) {
	t.countEffect(app, c)
	e := t.near(app, key)
	if e == nil {
		return
	}
	if e.near.eff == nil {
		e.near.eff = &effectRing{}
	}
	e.near.eff.add(c, now)
}

// extras fills in ks what e's state says at now: its sources, how many
// distinct ones, and its effect. The caller holds t.mu.
func (t *table) extras(ks *KeyState, e *entry, now time.Time) {
	nr := e.near
	if nr == nil {
		return
	}
	ns, tc := now.UnixNano(), tau(e)
	ks.Sources = nr.src.shares(ns, tc)
	ks.DistinctSources = nr.src.distinct(ns, tc)
	if nr.eff == nil {
		return
	}
	if r, ok := nr.eff.rates(now); ok {
		ks.Effect = &r
		if f, ok := r.ServedL1(); ok {
			ks.ServedL1 = &f
		}
	}
}

// effects returns the effect rates of app's keys ("": every app's) that
// have any over the effect window at now.
func (t *table) effects(app string, now time.Time) []shardapi.KeyEffectRates {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []shardapi.KeyEffectRates{}
	for _, e := range t.nears {
		if e.near.eff == nil || app != "" && e.app.name != app {
			continue
		}
		if r, ok := e.near.eff.rates(now); ok {
			out = append(out, shardapi.KeyEffectRates{App: e.app.name, Key: e.key, Effect: r})
		}
	}
	return out
}

// promotedSources returns the busiest sources of app's key at now, for a
// promotion handed to the Recorder. The caller holds t.mu.
func (t *table) promotedSources(app, key string, now time.Time) []decision.SourceShare {
	as := t.apps[app]
	if as == nil {
		return nil
	}
	e := as.keys[key]
	if e == nil || e.near == nil {
		return nil
	}
	shares := e.near.src.shares(now.UnixNano(), tau(e))
	if len(shares) == 0 {
		return nil
	}
	out := make([]decision.SourceShare, len(shares))
	for i, s := range shares {
		out[i] = decision.SourceShare{Source: s.Source, Share: s.Share}
	}
	return out
}
