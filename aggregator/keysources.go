package aggregator

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/axiomhq/hyperloglog"

	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/shardapi"
)

const (
	// maxKeySources bounds the sources a key near its threshold keeps
	// (Space-Saving): any source that sends more than 1/32 of the key's
	// accesses is among them, and a source's count is over by at most
	// what the one it replaced had (err, taken off when answering).
	maxKeySources = 32
	// maxSourceName bounds a kept source name, in bytes (a DNS name has
	// at most 253); a longer one is cut at a character boundary.
	maxSourceName = 255
	// distinctPrecision is the HyperLogLog precision of the distinct
	// sources: 2^12 registers, a standard error of 1.6 %, 4 KiB once
	// dense; sparse (a few bytes per source) while a key has few. It must
	// be the detectors' (detector/sources.go, sketchPrecision): sketches
	// of another precision do not merge and are dropped (counted in
	// sketches_rejected_total). 12 rather than the library's default 14
	// (16 KiB dense): the estimate is for reading, and two sketches are
	// kept per key.
	distinctPrecision = 12
	// denseAt is how many bytes of sketches a period's sketch takes in
	// sparse before it turns dense: the library merges sparse sketches by
	// sorting and rebuilding their list (about 1 ms for 1000 sources, under
	// the table lock), a dense one in O(entries merged), for a fixed 4 KiB.
	// A few dozen sources stay sparse (a few bytes each).
	denseAt = 512
)

// srcCount is one source of a key and its accesses, decayed. err is the
// part of n it inherited from the source it replaced (Space-Saving's
// overestimate), decayed alike; n-err is a lower bound of its accesses.
type srcCount struct {
	name   string
	n, err float64
}

// keySources is who sends a key near its threshold: the busiest sources
// and the key's accesses, both decayed exponentially with the same time
// constant (the rule's window, at least 1 s), so that a source's share is
// its part of the key's accesses over about that window; and the distinct
// sources of the current and the previous period of that length.
//
// Both sides of a share come from the detectors' sources reports, each a
// key's total and busiest sources over the same rounds (about a second of
// them), and are placed on the receipt clock: a share covers the same
// rounds above and below the line whatever their event time, and the
// key's counts, which arrive every round, never touch this state.
//
// The table lock guards the counts; the sketches have a lock of their own,
// so that a batch's sketches are decoded and merged after the table lock
// is released (apply): merging costs microseconds per sketch, counting
// nanoseconds per key.
type keySources struct {
	at    int64   // Unix ns the decayed counts are as of
	total float64 // the key's accesses, decayed
	top   []srcCount

	mu     sync.Mutex          // guards the fields below
	cur    *hyperloglog.Sketch // the distinct sources of period number period; nil: none
	prev   *hyperloglog.Sketch // those of the period before it
	period int64
	merged int  // bytes of the sketches merged into cur
	dense  bool // cur is dense
}

// decay brings the counts to now (Unix ns) with time constant tau (ns). A
// clock that went back leaves them as they are.
func (s *keySources) decay(now, tau int64) {
	if now <= s.at {
		return
	}
	if s.at != 0 {
		f := math.Exp(-float64(now-s.at) / float64(tau))
		s.total *= f
		for i := range s.top {
			s.top[i].n *= f
			s.top[i].err *= f
		}
	}
	s.at = now
}

// merge adds what a detector saw of the key over some rounds: total
// accesses, and the busiest sources among them (Space-Saving: a source not
// kept takes the place of the least busy one when all maxKeySources places
// are taken, with that one's count added to its own). A detector older
// than partial-count version 7 sends no total (0): its sources count as the
// whole, so its keys' shares are over the sources it named until it is
// upgraded.
func (s *keySources) merge(total uint64, top []wire.SourceCount, now, tau int64) {
	s.decay(now, tau)
	n := float64(total)
	if total == 0 {
		for _, sc := range top {
			n += float64(sc.N)
		}
	}
	s.total += n
	for _, sc := range top {
		c := float64(sc.N)
		name := sourceName(sc.Src)
		i := slices.IndexFunc(s.top, func(x srcCount) bool { return x.name == name })
		switch {
		case i >= 0:
			s.top[i].n += c
		case len(s.top) < maxKeySources:
			s.top = append(s.top, srcCount{name: strings.Clone(name), n: c})
		default:
			m := 0
			for j := range s.top {
				if s.top[j].n < s.top[m].n {
					m = j
				}
			}
			s.top[m] = srcCount{name: strings.Clone(name), n: s.top[m].n + c, err: s.top[m].n}
		}
	}
}

// sourceName is name cut to maxSourceName bytes at a character boundary.
func sourceName(name string) string {
	if len(name) <= maxSourceName {
		return name
	}
	i := maxSourceName
	for i > 0 && !utf8.RuneStart(name[i]) {
		i--
	}
	return name[:i]
}

// shares returns the busiest sources at now (at most shardapi.MaxSources,
// busiest first), each with its share of the key's accesses: its lower
// bound n-err over the key's total.
//
// The total is at least what the sources sent (the sum of the kept
// counts, which Space-Saving keeps whole), so that the shares add up to
// at most 1 even if a report's total fell short of its sources' sum (a
// detector's report is consistent, but a total saturates, and an older
// detector's is made up of its sources).
func (s *keySources) shares(now, tau int64) []shardapi.SourceShare {
	s.decay(now, tau)
	var sent float64
	for _, c := range s.top {
		sent += c.n
	}
	total := max(s.total, sent)
	if total <= 0 {
		return nil
	}
	idx := make([]int, len(s.top))
	for i := range idx {
		idx[i] = i
	}
	lb := func(i int) float64 { return s.top[i].n - s.top[i].err }
	slices.SortFunc(idx, func(x, y int) int {
		return cmp.Or(cmp.Compare(lb(y), lb(x)), cmp.Compare(s.top[x].name, s.top[y].name))
	})
	var out []shardapi.SourceShare
	for _, i := range idx[:min(len(idx), shardapi.MaxSources)] {
		// 0.01 % is enough to read; 0 is a source that stopped long ago,
		// or one that took another's place and has not shown since.
		share := math.Round(lb(i)/total*1e4) / 1e4
		if share == 0 {
			break
		}
		out = append(out, shardapi.SourceShare{Source: s.top[i].name, Share: share})
	}
	return out
}

// rotate starts the period of now (Unix ns; periods are tau long), keeping
// the current period's sketch as the previous one when it is the period
// just before. The caller holds s.mu.
func (s *keySources) rotate(now, tau int64) {
	p := now / tau
	switch {
	case p == s.period:
		return
	case p == s.period+1:
		s.prev = s.cur
	default:
		s.prev = nil
	}
	s.cur, s.period, s.merged, s.dense = nil, p, 0, false
}

// addDistinct merges a round's serialized sketch of the key's distinct
// sources, and reports false when it could not (not a sketch, or one of
// another precision). It takes s.mu, not the table lock.
func (s *keySources) addDistinct(b []byte, now, tau int64) bool {
	var in hyperloglog.Sketch
	if in.UnmarshalBinary(b) != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotate(now, tau)
	if s.cur == nil {
		s.cur, _ = hyperloglog.NewSketch(distinctPrecision, true) // a valid precision
	}
	if s.merged += len(b); s.merged > denseAt && !s.dense {
		d, _ := hyperloglog.NewSketch(distinctPrecision, false)
		_ = d.Merge(s.cur) // same precision
		s.cur, s.dense = d, true
	}
	return s.cur.Merge(&in) == nil
}

// distinct estimates the distinct sources of the current and the previous
// period: over one to two of the key's windows.
func (s *keySources) distinct(now, tau int64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotate(now, tau)
	if s.cur == nil && s.prev == nil {
		return 0
	}
	m, _ := hyperloglog.NewSketch(distinctPrecision, true)
	_ = m.Merge(s.cur) // nil is empty; both are of distinctPrecision
	_ = m.Merge(s.prev)
	return m.Estimate()
}
