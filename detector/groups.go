package detector

import (
	"cmp"
	"slices"
	"time"
)

// maxGroups bounds the flushes one round sends (see group).
const maxGroups = 4

// group is the counts of the cuts of a round (see worker.cut) whose event
// times overlap, sent as one Flush: the aggregators spread each count over
// the steps of its Flush by the Flush's weights. One set of weights is
// right for counts that happened in the same stretch of event time, and
// wrong for those of a partition that lags the others (a backlog after a
// rebalance, a slow fetch) or that read two producers' batches in one
// round: they would be spread over the others' steps too. One group of two
// steps 100 ms apart put 5–6 % of a key's accesses on the wrong side of a
// window's edge (issue 41).
type group struct {
	first, last    int64 // steps of oldest and newest
	oldest, newest int64 // event time of its counts, Unix ms (0, 0: none)
	pieces         []*piece
	counts         []Count
	index          map[appKey]int // counts' index by key
	spread         spread         // its counts' accesses per step of event time
}

// piece is one cut of one partition's round, as the flusher groups it.
type piece struct {
	counts         []Count
	oldest, newest int64
	n              uint64
	spread         *spread // nil: n accesses in the step of oldest
}

// group sorts the cuts of the round's partials into f.groups: those with
// event times into groups of overlapping stretches of steps, oldest first,
// at most maxGroups (the closest are merged); those without (counts of keys
// decided as their bucket closed, entries without a time) into the newest
// group, or a group of their own when none has a time. Then it merges each
// group's counts by key.
func (f *flusher) group() {
	f.pieces = f.pieces[:0]
	for _, p := range f.parts {
		start := 0
		for _, c := range p.cuts {
			if c.end > start || c.newest > 0 {
				f.pieces = append(f.pieces, piece{counts: p.counts[start:c.end], oldest: c.oldest, newest: c.newest, n: c.n, spread: c.spread})
			}
			start = c.end
		}
	}
	f.groups = f.groups[:0]
	timed := f.order[:0]
	for i := range f.pieces {
		if f.pieces[i].newest > 0 {
			timed = append(timed, &f.pieces[i])
		}
	}
	slices.SortFunc(timed, func(a, b *piece) int { return cmp.Compare(a.oldest, b.oldest) })
	for _, pc := range timed {
		first, last := pc.oldest/f.step, pc.newest/f.step
		if n := len(f.groups); n > 0 && first <= f.groups[n-1].last {
			g := f.groups[n-1]
			g.last, g.newest = max(g.last, last), max(g.newest, pc.newest)
			g.pieces = append(g.pieces, pc)
			continue
		}
		g := f.newGroup()
		g.first, g.last, g.oldest, g.newest = first, last, pc.oldest, pc.newest
		g.pieces = append(g.pieces, pc)
	}
	f.order = timed
	for len(f.groups) > maxGroups {
		f.mergeClosest()
	}
	if len(f.groups) == 0 {
		f.newGroup()
	}
	last := f.groups[len(f.groups)-1]
	for i := range f.pieces {
		if f.pieces[i].newest == 0 {
			last.pieces = append(last.pieces, &f.pieces[i])
		}
	}
	for _, g := range f.groups {
		f.mergeCounts(g)
	}
}

// newGroup appends an empty group to f.groups, reusing the buffers of one
// of an earlier round.
func (f *flusher) newGroup() *group {
	n := len(f.groups)
	if n < cap(f.groups) && f.groups[:n+1][n] != nil {
		f.groups = f.groups[:n+1]
	} else {
		f.groups = append(f.groups, &group{index: map[appKey]int{}, spread: spread{step: f.step}})
	}
	g := f.groups[n]
	g.first, g.last, g.oldest, g.newest = 0, 0, 0, 0
	g.pieces, g.counts = g.pieces[:0], g.counts[:0]
	clear(g.index)
	g.spread.reset()
	return g
}

// mergeClosest merges the two neighbouring groups with the shortest gap of
// event time between them.
func (f *flusher) mergeClosest() {
	best := 1
	for i := 2; i < len(f.groups); i++ {
		if f.groups[i].first-f.groups[i-1].last < f.groups[best].first-f.groups[best-1].last {
			best = i
		}
	}
	a, b := f.groups[best-1], f.groups[best]
	a.last, a.newest = max(a.last, b.last), max(a.newest, b.newest)
	a.pieces = append(a.pieces, b.pieces...)
	// b's buffers go to the end of the list, for reuse.
	copy(f.groups[best:], f.groups[best+1:])
	f.groups[len(f.groups)-1] = b
	f.groups = f.groups[:len(f.groups)-1]
}

// mergeCounts sums g's pieces' counts per key and their accesses per step.
func (f *flusher) mergeCounts(g *group) {
	for _, pc := range g.pieces {
		if pc.spread != nil {
			g.spread.merge(pc.spread)
		} else if pc.n > 0 {
			g.spread.addAt(pc.oldest/f.step, pc.n)
		}
		if len(g.pieces) == 1 {
			g.counts = append(g.counts, pc.counts...)
			continue
		}
		for _, c := range pc.counts {
			k := appKey{c.App, c.Key}
			if j, ok := g.index[k]; ok {
				m := &g.counts[j]
				m.N = satAdd(m.N, c.N)
				m.Writes = satAdd(m.Writes, c.Writes)
				m.Bytes = satAdd(m.Bytes, c.Bytes)
				m.WriteBytes = satAdd(m.WriteBytes, c.WriteBytes)
				continue
			}
			g.index[k] = len(g.counts)
			g.counts = append(g.counts, c)
		}
	}
}

// span is the event time g's counts cover (see collect).
func (g *group) span() time.Duration {
	if g.newest > 0 && g.oldest > 0 {
		return time.Duration(g.newest-g.oldest) * time.Millisecond
	}
	return 0
}

// counts returns how many counts the round's groups hold.
func (f *flusher) counts() int {
	n := 0
	for _, g := range f.groups {
		n += len(g.counts)
	}
	return n
}
