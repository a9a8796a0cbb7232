package detector

import (
	"bytes"
	"slices"

	"github.com/axiomhq/hyperloglog"
	"github.com/cespare/xxhash/v2"

	"github.com/hotspot-dev/hotspot/aggregator/api"
)

// KeySources is what a round saw of one key's sources (see api.KeySources).
type KeySources = api.KeySources

// KeyEffect is the effect the apps reported for one key (see api.KeyEffect).
type KeyEffect = api.KeyEffect

// Sources are tracked only for keys near the threshold: a key's sources
// start to be counted once its window on this partition holds half its
// share of a hot key's window (counter.srcMark), at most maxTrackers keys
// per partition at a time, each with its topSources busiest sources of the
// round (Space-Saving) and a HyperLogLog of all of them (sketchPrecision:
// 2^12 registers, a standard error of 1.6 %). The sketch is dense (4 KiB;
// an insertion is a register update, where a sparse one is a hash-set
// insertion, which cost a third of hotspotd's CPU with 100 instances) and
// goes out with every sketchEvery-th round (about 2 KiB serialized, once a
// second per tracked key), then starts afresh. The aggregators merge them
// (docs/aggregator.md, "Sources").
const (
	maxTrackers     = 256
	topSources      = 16
	sketchPrecision = 12
	sketchEvery     = 10
)

// srcTracker counts one key's sources over a round: the hashes it scans
// apart from the names and counts, so that a lookup reads two cache lines.
// Sources are told apart by their 64-bit hashes alone: two that collide
// (about one pair in 2^64) would share a count.
type srcTracker struct {
	hs     [topSources]uint64 // xxhash of each source in the list
	ns     [topSources]uint64
	srcs   [topSources][]byte // buffers reused as sources come and go
	n      int                // sources in the list
	idx    uint32             // the key's entry
	seen   bool
	rounds int // since the sketch last went out
	hll    *hyperloglog.Sketch
}

// add counts n accesses from source r: Space-Saving, so that a source that
// is not in the list takes the place of the least busy one, with its count
// plus that one's (an overestimate by at most the smallest count). The
// sketch gets each source when it enters the list: one already in it was
// counted there this round.
func (t *srcTracker) add(r *srcRef, n uint64) {
	t.seen = true
	for i, h := range t.hs[:t.n] {
		if h == r.h {
			t.ns[i] = satAdd(t.ns[i], n)
			return
		}
	}
	t.hll.InsertHash(r.h)
	if t.n < topSources {
		t.hs[t.n], t.ns[t.n], t.srcs[t.n] = r.h, n, append(t.srcs[t.n][:0], r.b...)
		t.n++
		return
	}
	m := 0
	for i := 1; i < topSources; i++ {
		if t.ns[i] < t.ns[m] {
			m = i
		}
	}
	t.hs[m], t.ns[m], t.srcs[m] = r.h, satAdd(t.ns[m], n), append(t.srcs[m][:0], r.b...)
}

// queueSource queues the source of the access about to be queued; the
// accesses of one record share one copy and hash.
func (c *counter) queueSource(src []byte) {
	q := &c.q
	if k := len(q.refs); k == 0 || !bytes.Equal(q.refs[k-1].b, src) {
		var b []byte
		if k < cap(q.refs) {
			b = q.refs[:k+1][k].b[:0] // reuse the copy's buffer
		}
		b = append(b, src...)
		q.refs = append(q.refs, srcRef{b: b, h: xxhash.Sum64(b)})
	}
	q.srcs = append(q.srcs, queuedSource{at: uint32(len(q.ends)), ref: uint32(len(q.refs) - 1)})
}

// take returns the round's sources of key app/key, busiest first, with the
// sketch every sketchEvery rounds, and starts the next round.
func (t *srcTracker) take(app, key string) KeySources {
	ks := KeySources{App: app, Key: key, Top: make([]api.SourceCount, t.n)}
	for i := range t.n {
		ks.Top[i] = api.SourceCount{Src: string(t.srcs[i]), N: t.ns[i]}
	}
	slices.SortFunc(ks.Top, func(a, b api.SourceCount) int {
		if a.N != b.N {
			if a.N > b.N {
				return -1
			}
			return 1
		}
		return 0
	})
	if t.rounds++; t.rounds >= sketchEvery {
		ks.Distinct, _ = t.hll.AppendBinary(nil) // cannot fail
		t.hll.Reset()
		t.rounds = 0
	}
	t.n, t.seen = 0, false
	return ks
}

// addSource counts n accesses of entry idx from source r, when the key is
// near the threshold.
func (c *counter) addSource(idx uint32, r *srcRef, n uint64) {
	e := &c.entries[idx]
	if e.src == 0 {
		if e.window < c.srcMark || len(c.trackers)-len(c.freeSrc) >= maxTrackers {
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

// takeSources appends the round's sources of every tracked key that had any
// to dst and starts the next round. A tracked key whose window fell below
// the mark is tracked no more.
func (c *counter) takeSources(dst []KeySources) []KeySources {
	c.drain()
	for _, t := range c.trackers {
		if t == nil {
			continue
		}
		e := &c.entries[t.idx]
		if t.seen {
			app, key := splitKey(e.key)
			dst = append(dst, t.take(app, key))
		}
		if e.window < c.srcMark/2 {
			c.dropSource(e)
		}
	}
	return dst
}
