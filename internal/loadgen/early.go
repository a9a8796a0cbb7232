package loadgen

import (
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// windowForHot is the window over which a planted key counts as hot.
const windowForHot = time.Second

// Early sending (Config.EarlyCount): an early send by the SDK's reporter, as
// the generator plays it, to measure what it would gain before building it
// into hotcache (which does not have it). A planted key whose count in the binary batch
// being filled reaches EarlyCount is sent at the end of the tick in a record
// of its own (with every other such key of the tick), at most once per
// flush interval, instead of waiting for the interval's end. Only while the
// key is not hot yet (its trailing one-second count in the truth is below
// the threshold): once an app promotes a key it counts the key in its L1
// entry, which reports at the interval's end. Background keys are not sent
// early: those above the threshold are hot from the start, and the rest
// seldom reach EarlyCount in one interval.

// sendEarly emits, at the end of tick i, the planted keys due for an early
// send, one record per app.
func (g *generator) sendEarly(i int64) {
	if g.c.EarlyCount == 0 || g.c.Form != FormBinary {
		return
	}
	slot := int(i / g.perSlot)
	for a, app := range g.apps {
		if g.srcs != nil {
			g.sendEarlySources(a, app, slot)
			continue
		}
		kcs := g.kcs[:0]
		var events int64
		for j := range g.plants {
			p := &g.plants[j]
			if p.app != a || p.early || p.pending < g.c.EarlyCount || g.hotInTruth(p.truth, slot) {
				continue
			}
			kcs = append(kcs, wire.KeyCount{Key: p.f.Key, Count: p.pending})
			events += int64(p.pending)
			p.pending, p.early = 0, true
		}
		if len(kcs) > 0 {
			from := len(g.slab)
			g.slab = wire.AppendBatch(g.slab, app, g.aggStart, kcs)
			g.stats.Entries += int64(len(kcs))
			g.stats.EarlyRecords++
			g.emit(from, events, 0)
		}
		g.kcs = kcs[:0]
	}
}

// hotInTruth reports whether truth key k's count over the second ending
// with slot (the open slot included) reached the threshold.
func (g *generator) hotInTruth(k, slot int) bool {
	counts := g.truth.Keys[k].Counts
	w := g.truth.slots(windowForHot)
	var sum uint64
	for s := max(0, slot-w+1); s <= slot && s < len(counts); s++ {
		sum += counts[s]
	}
	return float64(sum) >= g.c.Threshold*windowForHot.Seconds()
}
