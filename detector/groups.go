package detector

import (
	"cmp"
	"slices"
	"time"
)

// maxGroups bounds the flushes one round sends (see groups).
const maxGroups = 4

// group is the counts of a round's partitions whose event times overlap,
// sent as one Flush: the aggregators spread each count over the steps of
// its Flush by the Flush's weights, which are right for the counts of
// partitions that read the same stretch of event time, and wrong for those
// of one that read another. A round holds several groups when a partition
// lags the others (a backlog after a rebalance, a slow fetch): a count of
// the lagging partition then stays in its own steps, and the others' in
// theirs. One group of two disjoint steps, 100 ms apart, put 5–6 % of a
// key's accesses on the wrong side of a window's edge (issue 41).
type group struct {
	first, last    int64 // steps of oldest and newest
	oldest, newest int64 // event time of its counts, Unix ms (0, 0: none)
	parts          []int // its partitions' partials, by index in the round's
	counts         []Count
	index          map[appKey]int // counts' index by key
	spread         spread         // its counts' accesses per step of event time
}

// groups sorts the round's partials into f.groups: those with event times
// into groups of overlapping stretches of steps, oldest first, at most
// maxGroups (the closest are merged); those without (no records, or only
// entries without a time) into the newest group, or a group of their own
// when none has a time. Then it merges each group's counts by key.
func (f *flusher) group() {
	f.groups = f.groups[:0]
	step := f.step
	timed := f.order[:0]
	for i, p := range f.parts {
		if p.newest > 0 {
			timed = append(timed, i)
		}
	}
	slices.SortFunc(timed, func(a, b int) int { return cmp.Compare(f.parts[a].oldest, f.parts[b].oldest) })
	for _, i := range timed {
		p := &f.parts[i]
		first, last := p.oldest/step, p.newest/step
		if n := len(f.groups); n > 0 && first <= f.groups[n-1].last {
			g := f.groups[n-1]
			g.last, g.newest = max(g.last, last), max(g.newest, p.newest)
			g.parts = append(g.parts, i)
			continue
		}
		g := f.newGroup()
		g.first, g.last, g.oldest, g.newest = first, last, p.oldest, p.newest
		g.parts = append(g.parts, i)
	}
	f.order = timed
	for len(f.groups) > maxGroups {
		f.mergeClosest()
	}
	if len(f.groups) == 0 {
		f.newGroup()
	}
	last := f.groups[len(f.groups)-1]
	for i, p := range f.parts {
		if p.newest == 0 {
			last.parts = append(last.parts, i)
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
	g.parts, g.counts = g.parts[:0], g.counts[:0]
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
	a.parts = append(a.parts, b.parts...)
	// b's buffers go to the end of the list, for reuse.
	copy(f.groups[best:], f.groups[best+1:])
	f.groups[len(f.groups)-1] = b
	f.groups = f.groups[:len(f.groups)-1]
}

// mergeCounts sums g's partitions' counts per key and their spreads.
func (f *flusher) mergeCounts(g *group) {
	for _, i := range g.parts {
		p := &f.parts[i]
		if p.spread != nil {
			g.spread.merge(p.spread)
		}
		if len(g.parts) == 1 {
			g.counts = append(g.counts, p.counts...)
			continue
		}
		for _, c := range p.counts {
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
