package aggregator

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/hotset/decision"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/rules"
)

// evictSamples is how many random tracked keys a newcomer is compared with
// when the table is full (Redis-style sampled eviction): the evicted key is
// the coldest of the samples, which is colder than about 1-1/(s+1) of all
// keys on average, at O(1) cost per insertion instead of an ordered index
// that every partial would have to update.
const evictSamples = 8

// entry is one tracked (app, key).
type entry struct {
	app   *appState
	key   string
	idx   int       // position in table.entries
	r     *resolved // its rule, resolved when it arrived or its app's rules changed
	win   window    // counts r's quantity over r's window
	rate  float64   // at the last sweep; top-K order
	hot   bool      // held hot by the rule
	fresh bool      // in table.fresh: got counts since the reach last moved past them
	since time.Time // when it turned hot
	below time.Time // zero, or when a hot key's rate fell below the low mark
	// confirmed is when the key's rate was last seen at or above the low
	// mark: the age of the decision that holds it hot.
	confirmed time.Time
	pubRate   float64 // rate in the last write of its app's node; 0: not written
	// crossed is the newest bucket of the window that made a hot key hot.
	// Its rate is never read from a window that ends before it: when every
	// detector went idle right after the key's counts, the reach stays
	// before their bucket until one of them reports counts again.
	crossed int64

	// A key restored from this shard's node at start has no live counts yet:
	// until holdFrom its published rate is reported and the hold does not
	// start, so the live stream has one full window to confirm it. A key
	// promoted on the window still being filled reports that window's rate
	// the same way, until the evaluated window has caught up.
	seed     float64
	holdFrom time.Time

	near *near // sources and effect, for a key near its threshold; nil otherwise (near.go)
}

// appState is everything the table knows about one app.
type appState struct {
	name      string
	rs        *ruleSet // its rules
	keys      map[string]*entry
	hot       map[string]*entry // subset of keys with hot set
	dirty     bool              // the hot set changed since the last write began
	written   bool              // its node may exist in ZooKeeper
	lastWrite time.Time         // when the last write began
	lastSet   time.Time         // when the last write of a changed hot set began
	pending   []time.Time       // crossing buckets of promotions not yet acknowledged
	top       []KeyState        // busiest keys at the last sweep, descending
	heap      []*entry          // sweep scratch: min-heap of the busiest keys by rate
}

// params are the table's default rule and bounds, in the units it
// computes with. The rule a key is judged by is its entry's resolved rule.
type params struct {
	buckets  int     // buckets per window
	bucketNs int64   // bucket length
	winSec   float64 // window length in seconds
	hotSum   float64 // window total at which a key turns hot (Threshold*winSec)
	lowSum   float64 // window total under which a hot key's hold runs
	hold     time.Duration
	thresh   float64 // Threshold, accesses/s
	low      float64 // LowMark, accesses/s
	stall    time.Duration
	maxStall time.Duration
	window   time.Duration
	maxLag   time.Duration // how far the reach may trail the clock (see reach)
	maxKeys  int
	maxBytes int64 // of tracked keys, as keyBytes accounts them
	maxApps  int
	maxHot   int
	maxNear  int
	topK     int
	record   bool            // keep decisions for Config.Recorder
	def      rules.Effective // the default rule, from Config
}

func newParams(c Config) params {
	w := c.Window.Seconds()
	return params{
		buckets:  int(c.Window / c.Bucket),
		bucketNs: int64(c.Bucket),
		winSec:   w,
		hotSum:   c.Threshold * w,
		lowSum:   c.LowMark * w,
		hold:     c.Hold,
		thresh:   c.Threshold,
		low:      c.LowMark,
		stall:    c.Stall,
		maxStall: c.MaxStall,
		window:   c.Window,
		maxLag:   c.Window,
		maxKeys:  c.MaxKeys,
		maxBytes: c.MaxBytes,
		maxApps:  c.MaxApps,
		maxHot:   c.MaxHotPerApp,
		maxNear:  c.MaxNearKeys,
		topK:     c.TopK,
		record:   c.Recorder != nil,
		def:      rules.Default(c.Threshold, c.Window, c.Hold, c.LowMark/c.Threshold),
	}
}

// table is the aggregator's state: windows, the rule's state per key, the
// top-K view and the publication state per app.
type table struct {
	p params
	m *metrics

	mu        sync.Mutex // guards everything below
	apps      map[string]*appState
	entries   []*entry  // every tracked key, for sweeps and sampled eviction
	lastInput time.Time // when the last partials batch (even an empty one) arrived
	stalled   bool      // at the last sweep: detectors silent for Stall, not yet MaxStall
	lastSweep time.Time // when the last sweep ran
	sources   map[string]*source
	decided   []decision.Decision // not yet handed to the Recorder
	// bytes is what the tracked keys cost (keyBytes): at most maxBytes,
	// but while a rule change lengthens windows (trimmed after each
	// chunk, see setRules) or when hot keys, never evicted, take more.
	bytes int64
	// evalEnd is the newest bucket of the window that rates and the rule
	// read, as of the last batch or sweep (see setReach).
	evalEnd int64
	// pause is the last stretch in which no detector was heard from (see
	// age).
	pause [2]time.Time
	// behind is when the reach fell more than maxLag behind the clock,
	// zero while it is not: the evaluated window then ends maxLag back,
	// with the detectors' newest counts still missing (see unsure).
	behind time.Time
	// fresh lists the keys that got counts since the reach last moved
	// past them (entry.fresh), the only ones that can cross the threshold
	// when the reach moves forward: a key with no counts after the
	// evaluated window only loses counts as the window slides. checked is
	// the evalEnd at which they were last checked (see promoteAll).
	fresh   []*entry
	checked int64
	// nears lists the keys with sources and effect state (entry.near), at
	// most maxNear; effApps the apps' effect totals, at most maxApps;
	// instances the app instances' effect, at most maxInstances, pruned
	// of the silent ones at most once a second (at prunedAt).
	nears     []*entry
	effApps   map[string]*effectCounters
	instances map[instanceKey]*effectRing
	prunedAt  time.Time

	defSet   *rules.Set          // the default rule only
	defRules *ruleSet            // defSet resolved: the rules of an app without SetRules
	sets     map[string]*ruleSet // apps' rules from SetRules
}

// setReach moves the evaluated window to end at now's reach: the last
// whole bucket before the event time up to which every live detector has
// reported (see reach), so that a key's rate is its count over a full
// window of complete buckets divided by the window while the detectors lag
// up to maxLag. The windows keep no older buckets: a reach further back
// (every detector busy, a backlog replayed) is evaluated maxLag behind the
// clock, where counts are still missing, and the rates are unsure until it
// catches up. Without live event times (old detectors, Add) counts are
// placed at receipt and the window ends at now's bucket, as before event
// times. The caller holds t.mu.
func (t *table) setReach(now time.Time) {
	b := t.bucket(now)
	oldest := b - t.p.maxLag.Nanoseconds()/t.p.bucketNs
	ms, ok := t.reach(now, (oldest+1)*t.p.bucketNs/int64(time.Millisecond))
	if !ok {
		t.evalEnd, t.behind = b, time.Time{}
		return
	}
	end := min(ms*int64(time.Millisecond)/t.p.bucketNs-1, b)
	if end >= oldest {
		t.evalEnd, t.behind = end, time.Time{}
		return
	}
	t.evalEnd = oldest
	if t.behind.IsZero() {
		t.behind = now
		t.m.unsure.Inc()
	}
}

// unsure reports whether the evaluated window lacks counts that are still
// on their way: the reach has trailed the clock by more than maxLag, for
// less than maxStall (after that it is an outage, and the window is read as
// it is). Meanwhile a hot key is not demoted and its rate is not read lower
// than it was last published: a count that has not arrived yet is not a
// key turning cold. The caller holds t.mu.
func (t *table) unsure(now time.Time) bool {
	return !t.behind.IsZero() && now.Sub(t.behind) < t.p.maxStall
}

// silent reports whether no detector has sent a batch for Stall, but for
// less than MaxStall: they are rejoining their group or waiting for a broker,
// and what they counted meanwhile is late, not missing. The caller holds
// t.mu.
func (t *table) silent(now time.Time) bool {
	silence := now.Sub(t.lastInput)
	return !t.lastInput.IsZero() && silence >= t.p.stall && silence < t.p.maxStall
}

// heard records that a partials batch arrived at now: the first after a
// silence of every detector of Stall or more ends a pause (see age). The
// caller holds t.mu.
func (t *table) heard(now time.Time) {
	if !t.lastInput.IsZero() && now.Sub(t.lastInput) >= t.p.stall {
		t.paused(t.lastInput, now)
	}
	if now.After(t.lastInput) {
		t.lastInput = now
	}
}

// paused notes that no detector could be heard from between from and to:
// none sent (a rebalance stops them all), or this process did not run
// (frozen).
func (t *table) paused(from, to time.Time) {
	t.pause = [2]time.Time{from, to}
}

// age is how long s has been silent at now, leaving out the last pause:
// every detector was silent then, not s alone. When a rebalance stops them
// all, the first detector back must not find the others taken for dead
// (silent for Stall) and move the window without their counts, which are
// on their way; they are taken for dead once they stay silent for Stall
// after the pause. The caller holds t.mu.
func (t *table) age(s *source, now time.Time) time.Duration {
	age := now.Sub(s.heard)
	if !s.heard.After(t.pause[0]) {
		age -= t.pause[1].Sub(t.pause[0])
	}
	return age
}

func newTable(p params, m *metrics) *table {
	t := &table{p: p, m: m, apps: make(map[string]*appState), sources: make(map[string]*source),
		sets: make(map[string]*ruleSet), effApps: make(map[string]*effectCounters),
		instances: make(map[instanceKey]*effectRing)}
	t.evalEnd, t.checked = noEval, noEval
	t.defSet, _ = rules.Compile(nil, p.def) // a nil list cannot fail
	t.defRules = t.newRuleSet(nil)
	return t
}

func (t *table) bucket(now time.Time) int64 { return now.UnixNano() / t.p.bucketNs }

// spanBuckets is how many buckets a batch covering span of event time
// spreads over: the nearest whole number, at least 1.
func (t *table) spanBuckets(span time.Duration) int64 {
	return max(1, (int64(span)+t.p.bucketNs/2)/t.p.bucketNs)
}

// newWindow returns a window of rule r at bucket b: it keeps the buckets
// back to maxLag (and two for rounding) behind the evaluated window, so that
// the window can end at a reach that far behind the clock.
func (t *table) newWindow(b int64, r *resolved) window {
	return newRing(t.ringSize(r), r.buckets, b)
}

// ringSize is how many buckets a window of rule r keeps: r's window plus
// the lag the reach may have (see newWindow).
func (t *table) ringSize(r *resolved) int {
	return r.buckets + int(t.p.maxLag.Nanoseconds()/t.p.bucketNs) + 2
}

func (t *table) bucketStart(b int64) time.Time { return time.Unix(0, b*t.p.bucketNs) }

func (t *table) app(name []byte) *appState {
	as := t.apps[string(name)] // no allocation for the lookup
	if as == nil {
		as = &appState{name: string(name), keys: make(map[string]*entry), hot: make(map[string]*entry)}
		as.rs = t.rulesOf(as.name)
		t.apps[as.name] = as
	}
	return as
}

// span is when the accesses of a batch happened: in the proportions of
// weights over the steps of event time from first (Unix nanoseconds; step
// long each, their sum total) when the batch has them, else evenly over the
// event time [from, end] in Unix nanoseconds, or, when from is 0 (no event
// time), over the span newest buckets at receipt.
type span struct {
	from, end   int64
	buckets     int64
	first, step int64
	total       uint64
	weights     []uint64
}

// setWeights takes the distribution over event time a batch may carry: its
// Weights over steps of Step milliseconds from the step boundary at or
// before End-Span. One with no weight, a sum past 2^64-1 or steps longer
// than maxSpan is left out, and the counts are spread evenly.
func (sp *span) setWeights(h wire.PartialHeader) {
	if h.Step <= 0 || h.Step > maxSpan.Milliseconds() || h.End <= 0 {
		return
	}
	var total uint64
	for _, w := range h.Weights {
		if total+w < total {
			return
		}
		total += w
	}
	if total == 0 {
		return
	}
	start := max(h.End-h.Span, 0) / h.Step * h.Step
	sp.first, sp.step = start*int64(time.Millisecond), h.Step*int64(time.Millisecond)
	sp.total, sp.weights = total, h.Weights
}

// tally is one key's accesses in a partials batch: all of them (n), the
// writes among them, and the bytes of their values, of which writeBytes
// were written.
type tally struct{ n, writes, bytes, writeBytes uint64 }

// add counts the accesses c of (app, key) received at now, which happened
// over sp, and reports whether the key turned hot. What is counted is the
// quantity the key's rule selects from c; a key not tracked yet whose rule
// selects nothing of c (a write under a rule of reads) is not tracked. The
// caller holds t.mu and has called setReach.
func (t *table) add(app, key []byte, c tally, now time.Time, sp span) bool {
	b := t.bucket(now)
	var e *entry
	as := t.apps[string(app)]
	if as != nil {
		e = as.keys[string(key)]
	}
	var n uint64
	if e != nil {
		n = e.r.quantity(c)
	} else {
		rs := t.defRules
		if as != nil {
			rs = as.rs
		} else if s := t.sets[string(app)]; s != nil {
			rs = s
		}
		r := rs.match(string(key))
		if n = r.quantity(c); n == 0 {
			return false
		}
		// Room is made before anything is allocated for the newcomer.
		if !t.admitApp(app) {
			return false
		}
		cost := keyBytes(len(key), t.ringSize(r))
		if !t.roomFor(b, float64(n)/r.hotSum, cost) {
			t.m.evicted.WithLabelValues("refused").Inc()
			return false
		}
		as = t.app(app) // a new app takes rs, which r is of
		e = &entry{app: as, key: string(key), idx: len(t.entries), r: r, win: t.newWindow(b, r)}
		as.keys[e.key] = e
		t.entries = append(t.entries, e)
		t.m.tracked.Set(float64(len(t.entries)))
		t.grew(cost)
	}
	if n == 0 {
		return false
	}
	switch {
	case len(sp.weights) > 0:
		e.win.addWeights(b, sp.first, sp.step, sp.weights, sp.total, t.p.bucketNs, n)
	case sp.from > 0:
		e.win.addTime(b, sp.from, sp.end, t.p.bucketNs, n)
	default:
		e.win.addSpan(b, sp.buckets, n)
	}
	if !e.fresh {
		e.fresh = true
		t.fresh = append(t.fresh, e)
	}
	return t.check(e, b, now)
}

// check runs the rule's promotion on e at now (bucket b) over the
// evaluated window, and reports whether e turned hot. Promotion is decided
// as soon as the evaluated window reaches the threshold, at receipt or when
// the reach moves (promoteAll), not at the next sweep. The caller holds
// t.mu.
//
// Only threshold rules decide here: a never key is never hot, and the top-K
// cut (topk.go) decides for top-K keys.
func (t *table) check(e *entry, b int64, now time.Time) bool {
	if e.r.eff.Mode != rules.Threshold {
		return false
	}
	sum := float64(e.win.evalTo(t.evalEnd))
	switch {
	case !e.hot && sum >= e.r.hotSum:
		return t.promote(e, now, min(b, t.evalEnd), 0)
	case !e.hot && t.evalEnd < b:
		// The window one bucket later, ending in the bucket the detectors
		// are still filling, may already hold the threshold: its total can
		// only grow, so the key is hot in that window whatever is still
		// to come. Promoting it now saves waiting until every detector's
		// reach has passed that bucket (the next producer interval, about
		// 100 ms). Demotions keep reading complete buckets only; the
		// rate reported is that window's until they have caught up.
		if lead := float64(e.win.leading(t.evalEnd)); lead >= e.r.hotSum {
			return t.promote(e, now, t.evalEnd+1, lead/e.r.winSec)
		}
	case e.hot && sum >= e.r.lowSum:
		e.below, e.confirmed = time.Time{}, now
	}
	return false
}

// promote makes e hot at now, unless its app is full of hotter keys, and
// reports whether it did. crossed is the newest bucket of the window that
// reached the threshold. lead, when not 0, is the rate of that window when
// it is still being filled: the key reports it (as a restored key reports
// its seed) until the evaluated window has caught up, two buckets on. The
// caller holds t.mu.
func (t *table) promote(e *entry, now time.Time, crossed int64, lead float64) bool {
	if !t.makeHotRoom(e) {
		return false
	}
	as := e.app
	e.hot, e.since, e.below, e.confirmed, e.crossed = true, now, time.Time{}, now, crossed
	if lead > 0 {
		e.seed, e.holdFrom = lead, now.Add(2*time.Duration(t.p.bucketNs))
	}
	as.hot[e.key] = e
	as.dirty = true
	as.pending = append(as.pending, t.bucketStart(crossed))
	t.decide(e, decision.Promoted, now)
	return true
}

// promoteAll runs check, after the reach moved, on the keys that are not
// hot and may have crossed: those with counts after the window evaluated
// at the last check (t.fresh), or every key when the reach moved back
// (the window then covers older buckets). It reports whether one turned
// hot. A key stays fresh while it has counts after the evaluated window.
// The caller holds t.mu.
func (t *table) promoteAll(now time.Time) bool {
	if t.evalEnd == t.checked {
		return false
	}
	b := t.bucket(now)
	hot := false
	if t.evalEnd < t.checked {
		for _, e := range t.entries {
			if !e.hot {
				e.win.advance(b)
				hot = t.check(e, b, now) || hot
			}
		}
	}
	t.checked = t.evalEnd
	keep := t.fresh[:0]
	for _, e := range t.fresh {
		if e.idx >= len(t.entries) || t.entries[e.idx] != e {
			continue // forgotten meanwhile
		}
		e.win.advance(b)
		if !e.hot {
			hot = t.check(e, b, now) || hot
		}
		if e.win.from(t.evalEnd+1) == 0 {
			e.fresh = false
			continue
		}
		keep = append(keep, e)
	}
	clear(t.fresh[len(keep):])
	t.fresh = keep
	return hot
}

// makeRoom evicts the coldest of a few random keys that are not hot, unless
// a newcomer at heat would be colder still, and counts the eviction under
// reason. A key's heat is its window total as a fraction of its rule's
// threshold total, so that keys of rules with other measures and windows
// compare. It reports whether it evicted one.
func (t *table) makeRoom(b int64, heat float64, reason string) bool {
	var victim *entry
	for range evictSamples {
		e := t.entries[rand.IntN(len(t.entries))]
		if e.hot {
			continue // never evict a hot key: it would vanish from the published set
		}
		e.win.advance(b)
		if victim == nil || heatOf(e) < heatOf(victim) {
			victim = e
		}
	}
	if victim == nil || heatOf(victim) > heat {
		return false
	}
	t.remove(victim)
	t.m.evicted.WithLabelValues(reason).Inc()
	return true
}

// heatOf is e's window total as a fraction of its rule's threshold total.
func heatOf(e *entry) float64 { return float64(e.win.sum) / e.r.hotSum }

// remove forgets e. A hot key is never removed.
func (t *table) remove(e *entry) {
	if e.near != nil {
		t.dropNear(e)
	}
	last := t.entries[len(t.entries)-1]
	t.entries[e.idx] = last
	last.idx = e.idx
	t.entries = t.entries[:len(t.entries)-1]
	delete(e.app.keys, e.key)
	t.m.tracked.Set(float64(len(t.entries)))
	t.grew(-bytesOf(e))
}

// rate is e's rule's quantity per second (accesses or bytes) over the
// evaluated window (see setReach): its count over the rule's window that
// ends at the detectors' reach, or, for a hot key, at the bucket it crossed
// in if the reach is still before it. While the detectors are silent or
// the window is unsure, a hot key's rate is not read lower than it was
// last published.
func (t *table) rate(e *entry, now time.Time) float64 {
	end := t.evalEnd
	if e.hot && e.crossed > end {
		end = e.crossed
	}
	r := float64(e.win.evalTo(end)) / e.r.winSec
	if e.hot && e.pubRate > r && (t.silent(now) || t.unsure(now)) {
		return e.pubRate
	}
	// Only a hot key has a seed (demote clears it): testing hot first
	// spares the sweep a cache miss per key on seed, at the entry's end.
	if e.hot && e.seed > r && now.Before(e.holdFrom) {
		return e.seed
	}
	return r
}

// freezeGap is the gap between two sweeps (normally a bucket apart) that
// tells this process was frozen (SIGSTOP, a paused VM), not merely slow on a
// busy machine.
const freezeGap = 2 * time.Second

// sweep slides every window to now, runs the demotion side of the rule,
// forgets idle keys and rebuilds each app's top-K view. It reports whether
// it found that this process had been frozen (SIGSTOP, a VM pause) since
// the previous sweep.
func (t *table) sweep(now time.Time) (resumed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucket(now)
	// Sweeps run every bucket: a gap of freezeGap or more means this
	// process stood still, not the detectors. Its silence says nothing
	// about them (they were sending to the shards that took over), and its
	// hot keys' decisions are as old as the freeze: a key not confirmed
	// within a window plus the hold is demoted now, before any write
	// renews it.
	if !t.lastSweep.IsZero() && now.Sub(t.lastSweep) >= freezeGap {
		resumed = true
		t.paused(t.lastSweep, now)
		t.lastInput = now
	}
	t.lastSweep = now
	t.setReach(now)
	t.promoteAll(now) // the reach moved since the last batch
	t.stalled = t.silent(now)
	for _, as := range t.apps {
		as.heap = as.heap[:0]
	}
	for i := 0; i < len(t.entries); {
		e := t.entries[i]
		e.win.advance(b)
		if e.hot && resumed && now.Sub(e.confirmed) > e.r.window+e.r.eff.Hold && !now.Before(e.holdFrom) {
			t.demote(e, now)
		}
		switch {
		case e.hot && e.r.eff.Mode == rules.Never:
			t.demote(e, now) // restored under a rule that is never now
		case e.hot && e.r.eff.Mode == rules.TopK:
			// the top-K cut decides
		case e.hot:
			t.hold(e, now)
		}
		if e.near != nil && !t.isNear(e, keepFraction) {
			t.dropNear(e)
		}
		// Idle: nothing in the evaluated window or after it (what is
		// older will not be read again).
		if !e.hot && (e.win.sum == 0 || e.win.evalTo(t.evalEnd) == 0 && e.win.from(t.evalEnd+1) == 0) {
			t.remove(e) // moves the last entry to i
			t.m.evicted.WithLabelValues("idle").Inc()
			continue
		}
		e.rate = t.rate(e, now)
		t.pushTop(e)
		i++
	}
	for name, as := range t.apps {
		as.top = as.top[:0]
		slices.SortFunc(as.heap, func(x, y *entry) int { return cmp.Compare(y.rate, x.rate) })
		for _, e := range as.heap {
			as.top = append(as.top, t.state(e, now))
		}
		clear(as.heap)
		t.m.hot.WithLabelValues(name).Set(float64(len(as.hot)))
		if len(as.keys) == 0 && !as.written && !as.dirty {
			delete(t.apps, name)
			t.m.hot.DeleteLabelValues(name)
		}
	}
	return resumed
}

// hold runs the hysteresis of a hot key: it turns cold only once its rate
// has stayed below the low mark for the hold time.
func (t *table) hold(e *entry, now time.Time) {
	switch {
	case float64(e.win.evalTo(t.evalEnd)) >= e.r.lowSum:
		e.below, e.confirmed = time.Time{}, now
	case t.stalled, t.unsure(now):
		// A stall, or counts still on their way, say nothing about the
		// key: its hold starts over once the detectors are back.
		e.below = time.Time{}
	case now.Before(e.holdFrom):
		// restored key: the live stream has not had a full window yet
	case e.below.IsZero():
		e.below = now
	case now.Sub(e.below) >= e.r.eff.Hold:
		t.demote(e, now)
	}
}

// demote makes e cold.
func (t *table) demote(e *entry, now time.Time) {
	t.decide(e, decision.Demoted, now)
	e.hot, e.since, e.below, e.seed, e.pubRate = false, time.Time{}, time.Time{}, 0, 0
	delete(e.app.hot, e.key)
	e.app.dirty = true
}

// pushTop offers e to its app's bounded min-heap of the busiest keys.
func (t *table) pushTop(e *entry) {
	as := e.app
	h := as.heap
	if t.p.topK == 0 {
		return
	}
	if len(h) < t.p.topK {
		h = append(h, e)
		for i := len(h) - 1; i > 0; { // sift up
			p := (i - 1) / 2
			if h[p].rate <= h[i].rate {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
		as.heap = h
		return
	}
	if e.rate <= h[0].rate {
		return
	}
	h[0] = e
	for i := 0; ; { // sift down
		l, m := 2*i+1, i
		if l < len(h) && h[l].rate < h[m].rate {
			m = l
		}
		if r := l + 1; r < len(h) && h[r].rate < h[m].rate {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (t *table) state(e *entry, now time.Time) KeyState {
	return KeyState{App: e.app.name, Key: e.key, Rate: t.rate(e, now), Hot: e.hot, Since: e.since,
		Rule: e.r.eff.Index, Kind: e.r.kind}
}

// top returns up to n of app's busiest keys at the last sweep, with their
// sources and effect at now.
func (t *table) top(app string, n int, now time.Time) []KeyState {
	t.mu.Lock()
	defer t.mu.Unlock()
	as := t.apps[app]
	if as == nil || n <= 0 {
		return []KeyState{}
	}
	out := slices.Clone(as.top[:min(n, len(as.top))])
	for i := range out {
		if e := as.keys[out[i].Key]; e != nil {
			t.extras(&out[i], e, now)
		}
	}
	return out
}

// key returns (app, key)'s current state.
func (t *table) key(app, key string, now time.Time) (KeyState, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	as := t.apps[app]
	if as == nil {
		return KeyState{}, false
	}
	e := as.keys[key]
	if e == nil {
		return KeyState{}, false
	}
	e.win.advance(t.bucket(now))
	t.setReach(now)
	ks := t.state(e, now)
	t.extras(&ks, e, now)
	return ks, true
}

// restore makes the keys of a node this shard published before hot again,
// with their original since, as if they had just been confirmed: they stay
// hot for one window plus the hold time unless the live stream confirms them.
func (t *table) restore(s *hotset.Shard, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.admitApp([]byte(s.App)) {
		return 0
	}
	as := t.app([]byte(s.App))
	as.written = true
	as.lastWrite = time.UnixMilli(s.Updated)
	b := t.bucket(now)
	n := 0
	for _, k := range s.Keys {
		if k.Source != "" && k.Source != "detected" {
			continue
		}
		if as.keys[k.Key] != nil || len(t.entries) >= t.p.maxKeys || len(as.hot) >= t.p.maxHot {
			continue
		}
		r := as.rs.match(k.Key)
		if r.eff.Mode == rules.Never {
			continue
		}
		cost := keyBytes(len(k.Key), t.ringSize(r))
		if t.bytes+cost > t.p.maxBytes {
			continue
		}
		seed := k.Rate
		if k.Kind != r.kind && !(k.Kind == "" && r.kind == string(rules.KindCount)) {
			seed = 0 // published in another measure
		}
		e := &entry{
			app: as, key: k.Key, idx: len(t.entries), r: r, win: t.newWindow(b, r),
			hot: true, since: time.UnixMilli(k.Since), seed: seed, holdFrom: now.Add(r.window), confirmed: now,
		}
		as.keys[e.key] = e
		as.hot[e.key] = e
		t.entries = append(t.entries, e)
		t.grew(cost)
		n++
	}
	t.m.tracked.Set(float64(len(t.entries)))
	t.m.hot.WithLabelValues(as.name).Set(float64(len(as.hot)))
	return n
}
