package detector

import (
	"slices"

	"github.com/axiomhq/hyperloglog"

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
// 2^12 registers, a standard error of 1.6 %, at most 3 KiB dense and far
// less while sparse). The aggregators merge the rounds (docs/aggregator.md,
// "Sources").
const (
	maxTrackers     = 256
	topSources      = 16
	sketchPrecision = 12
)

// srcTracker counts one key's sources over a round.
type srcTracker struct {
	idx  uint32 // the key's entry
	top  [topSources]srcSlot
	n    int // slots in use
	seen bool
	hll  *hyperloglog.Sketch
}

type srcSlot struct {
	src string
	n   uint64
}

// add counts n accesses from src: Space-Saving, so that a source that is
// not in the list takes the place of the least busy one, with its count
// plus that one's (an overestimate by at most the smallest count).
func (t *srcTracker) add(src []byte, n uint64) {
	t.seen = true
	t.hll.Insert(src)
	for i := range t.top[:t.n] {
		if t.top[i].src == string(src) {
			t.top[i].n = satAdd(t.top[i].n, n)
			return
		}
	}
	if t.n < topSources {
		t.top[t.n] = srcSlot{string(src), n}
		t.n++
		return
	}
	m := 0
	for i := 1; i < topSources; i++ {
		if t.top[i].n < t.top[m].n {
			m = i
		}
	}
	t.top[m] = srcSlot{string(src), satAdd(t.top[m].n, n)}
}

// take returns the round's sources of key app/key, busiest first, and
// starts the next round.
func (t *srcTracker) take(app, key string) KeySources {
	ks := KeySources{App: app, Key: key, Top: make([]api.SourceCount, t.n)}
	for i, s := range t.top[:t.n] {
		ks.Top[i] = api.SourceCount{Src: s.src, N: s.n}
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
	ks.Distinct, _ = t.hll.AppendBinary(nil) // cannot fail
	t.top, t.n, t.seen = [topSources]srcSlot{}, 0, false
	t.hll.Reset()
	return ks
}

// addSource counts n accesses of entry idx from src, when the key is near
// the threshold.
func (c *counter) addSource(idx uint32, src []byte, n uint64) {
	e := &c.entries[idx]
	if e.src == 0 {
		if e.window < c.srcMark || len(c.trackers)-len(c.freeSrc) >= maxTrackers {
			return
		}
		t := &srcTracker{idx: idx}
		t.hll, _ = hyperloglog.NewSketch(sketchPrecision, true) // a valid precision
		if k := len(c.freeSrc); k > 0 {
			e.src = c.freeSrc[k-1] + 1
			c.freeSrc = c.freeSrc[:k-1]
			c.trackers[e.src-1] = t
		} else {
			c.trackers = append(c.trackers, t)
			e.src = uint32(len(c.trackers))
		}
	}
	c.trackers[e.src-1].add(src, n)
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
