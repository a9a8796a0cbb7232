package detector

import (
	"bytes"
	"cmp"
	"slices"
	"time"

	"github.com/axiomhq/hyperloglog"
	"github.com/cespare/xxhash/v2"

	"github.com/hotspot-dev/hotspot/shardapi"
)

// KeySources is what a round saw of one key's sources (see shardapi.KeySources).
type KeySources = shardapi.KeySources

// KeyEffect is the effect the apps reported for one key (see shardapi.KeyEffect).
type KeyEffect = shardapi.KeyEffect

// InstanceEffect is the effect one app instance reported for all its keys
// (see shardapi.InstanceEffect).
type InstanceEffect = shardapi.InstanceEffect

// Sources are tracked only for keys near the threshold: a key's sources
// start to be counted once its window on this partition holds half its
// share of a hot key's window (counter.srcMark), at most maxTrackers keys
// per partition at a time. A tracker counts the key's accesses and their
// sources in a table of srcSlots (below), and reports them once a second,
// in the round that passes a whole second of the clock (so that every
// partition's report of a key reaches the aggregator at about the same
// time, and its shares do not swing with the partitions' phases), in the
// first round it tracks (so that a key turning hot has its sources known),
// in the round the key is tracked no more and in the partition's last: the
// key's total, the topSources busiest sources and a HyperLogLog of all of
// them (sketchPrecision: 2^12 registers, a standard error of 1.6 %). It
// then starts afresh. The sketch is dense (4 KiB; an insertion is a
// register update, where a sparse one is a hash-set insertion; about 2 KiB
// serialized). The aggregators merge the reports (docs/aggregator.md,
// "Sources"). A report every round, as before, cost about half of what
// sources cost hotspotd (BENCHMARKS.md, I3).
const (
	maxTrackers     = 256
	topSources      = 16
	sketchPrecision = 12
)

// A tracker's table holds srcSlots sources; a source lives within
// srcProbe slots of its home slot (its hash's low bits), so that a lookup
// reads at most two cache lines of hashes. Sources stay from round to
// round, their counts starting again at 0, so that a key's usual readers
// are found, not copied in again, every round: 128 slots hold the 100
// instances of `hotspot bench --sources 100` with room to spare, where 64
// made them take each other's places every round (a third more CPU).
const (
	srcSlots = 128
	srcProbe = 8
)

// srcTracker counts one key's accesses and their sources between two
// reports. Sources are told apart by their 64-bit hashes alone: two that
// collide (about one pair in 2^64) would share a count; hash 0 marks an
// empty slot, so a source whose hash is 0 is counted as 1.
//
// An access with a source touches one slot, its hash and count side by
// side, and nothing else: the slots' counts add up to the accesses with a
// source (a slot taken over keeps its count, see add), so the key's total
// is that sum and the accesses without one (unsourced). With 50 tracked
// keys, a table does not stay in cache between two accesses of its key, so
// every line an access touches is a miss: a running total and hashes apart
// from their counts made three (BENCHMARKS.md, I3).
//
// A source is put in the sketch once per report: when the report goes out
// (report), or when it loses its slot (add). The sketch is the costly
// part, a register in 4 KiB read per source rather than per access.
type srcTracker struct {
	slots     [srcSlots]srcSlot
	names     [srcSlots][]byte      // buffers reused as sources come and go
	sketched  [srcSlots / 64]uint64 // bit i: slot i's source is in this report's sketch
	unsourced uint64                // the key's accesses without a source since the last report
	idx       uint32                // the key's entry
	reported  bool                  // a report went out
	hll       *hyperloglog.Sketch
}

// srcSlot is one source of a key and its count since the last report.
type srcSlot struct {
	h uint64 // xxhash of the source; 0: empty
	n uint64
}

// add counts n accesses from source r. A source not in the table takes
// the first free slot of its srcProbe, or else one whose source was not
// seen since the last report, or else (Space-Saving, within its probe
// slots) the least busy, with that one's count added to its own: an
// overestimate by at most that count, which only a key with more than
// srcSlots sources between two reports sees.
func (t *srcTracker) add(r *srcRef, n uint64) {
	h := max(r.h, 1)
	home := int(h)
	victim := -1
	for j := range srcProbe {
		i := (home + j) & (srcSlots - 1)
		s := &t.slots[i]
		switch {
		case s.h == h:
			s.n = satAdd(s.n, n)
			return
		case s.h == 0:
			t.put(i, h, r.b, n)
			return
		case victim < 0 || t.slots[victim].n != 0 && s.n < t.slots[victim].n:
			victim = i
		}
	}
	v := &t.slots[victim]
	if v.n != 0 && !t.inSketch(victim) {
		t.hll.InsertHash(v.h) // counted for this report: it must not go unsketched
	}
	t.put(victim, h, r.b, satAdd(v.n, n))
}

// put places source h, named b, in slot i with count n.
func (t *srcTracker) put(i int, h uint64, b []byte, n uint64) {
	t.slots[i] = srcSlot{h, n}
	t.names[i] = append(t.names[i][:0], b...)
	t.sketched[i/64] &^= 1 << (i % 64)
}

// counted reports whether the tracker counted an access since its last
// report.
func (t *srcTracker) counted() bool {
	if t.unsourced > 0 {
		return true
	}
	for _, s := range t.slots {
		if s.n > 0 {
			return true
		}
	}
	return false
}

// inSketch reports whether slot i's source is in this report's sketch.
func (t *srcTracker) inSketch(i int) bool { return t.sketched[i/64]&(1<<(i%64)) != 0 }

// queueSource sets src (empty: none) as the source of the access about to
// be queued and those after it: a run of accesses of one record shares
// one copy and hash of it.
func (c *counter) queueSource(src []byte) {
	q := &c.q
	k := len(q.srcs)
	if q.srcOn && bytes.Equal(q.srcs[k-1].b, src) {
		return
	}
	var b []byte
	if k < cap(q.srcs) {
		b = q.srcs[:k+1][k].b[:0] // reuse the copy's buffer
	}
	b = append(b, src...)
	q.srcs = append(q.srcs, srcRun{at: uint32(len(q.ends)), srcRef: srcRef{b: b, h: xxhash.Sum64(b)}})
	q.srcOn = len(src) > 0
}

// report returns what the tracker counted of key app/key since its last
// report: the total, the topSources busiest sources first and the sketch
// of all of them; and starts the next report.
func (t *srcTracker) report(app, key string) KeySources {
	var live [srcSlots]uint8
	k := 0
	total := t.unsourced
	for i, s := range t.slots {
		if s.n == 0 {
			continue
		}
		total = satAdd(total, s.n)
		live[k] = uint8(i)
		k++
		if !t.inSketch(i) {
			t.hll.InsertHash(s.h)
			t.sketched[i/64] |= 1 << (i % 64)
		}
	}
	order := live[:k]
	slices.SortFunc(order, func(a, b uint8) int { return cmp.Compare(t.slots[b].n, t.slots[a].n) })
	order = order[:min(k, topSources)]
	ks := KeySources{App: app, Key: key, Total: total, Top: make([]shardapi.SourceCount, len(order))}
	for j, i := range order {
		ks.Top[j] = shardapi.SourceCount{Src: string(t.names[i]), N: t.slots[i].n}
	}
	if k > 0 {
		ks.Distinct, _ = t.hll.AppendBinary(nil) // cannot fail
		t.hll.Reset()
	}
	for i := range t.slots {
		t.slots[i].n = 0
	}
	t.sketched, t.unsourced = [srcSlots / 64]uint64{}, 0
	t.reported = true
	return ks
}

// addSource counts n accesses of entry idx from source r. The key is near
// the threshold (its window has reached srcMark) or tracked already.
func (c *counter) addSource(idx uint32, r *srcRef, n uint64) {
	e := &c.entries[idx]
	if e.src == 0 {
		if len(c.trackers)-len(c.freeSrc) >= maxTrackers {
			return
		}
		t := &srcTracker{idx: idx}
		t.hll, _ = hyperloglog.NewSketch(sketchPrecision, false) // a valid precision
		if k := len(c.freeSrc); k > 0 {
			e.src = c.freeSrc[k-1] + 1
			c.freeSrc = c.freeSrc[:k-1]
			c.trackers[e.src-1] = t
		} else {
			c.trackers = append(c.trackers, t)
			e.src = uint32(len(c.trackers))
		}
	}
	c.trackers[e.src-1].add(r, n)
}

// dropSource frees entry e's tracker, if it has one.
func (c *counter) dropSource(e *entry) {
	if e.src != 0 {
		c.trackers[e.src-1] = nil
		c.freeSrc = append(c.freeSrc, e.src-1)
		e.src = 0
	}
}

// takeSources ends the round of now (Unix ns): it appends to dst the
// reports due of the tracked keys that had accesses since their last one
// (see maxTrackers); with final set, the partition's last round, every
// such report. A tracked key whose window fell below half the mark is
// tracked no more. (A key removed from the table with its tracker takes
// its report with it: its total and sources alike, so the shares of what
// was reported stand.)
func (c *counter) takeSources(dst []KeySources, now int64, final bool) []KeySources {
	c.drain()
	sec := now / int64(time.Second)
	due := sec != c.srcSec || final
	c.srcSec = sec
	for _, t := range c.trackers {
		if t == nil {
			continue
		}
		e := &c.entries[t.idx]
		stop := e.window < c.srcMark/2
		if (due || stop || !t.reported) && t.counted() {
			app, key := splitKey(e.key)
			dst = append(dst, t.report(app, key))
		}
		if stop {
			c.dropSource(e)
		}
	}
	return dst
}
