package router

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// maxCandidates bounds PickerConfig.Candidates so that Pick keeps its
// candidate list on the stack.
const maxCandidates = 16

// Sample is one measurement of a node, reported by whoever talks to it.
type Sample struct {
	HitRatio  float64       // fraction of reads the node answered from cache, in [0, 1]
	Load      float64       // utilization, in [0, 1] (busy connections / pool size, CPU, ...)
	Latency   time.Duration // response time of one request
	Staleness time.Duration // age of the node's data (replication lag); 0 is fresh
}

// Weights are the shares of each metric in a node's score.
type Weights struct {
	HitRatio  float64
	Load      float64
	Latency   float64
	Freshness float64
}

// DefaultWeights favour cache hits, then spare capacity, then speed, then
// fresh data.
var DefaultWeights = Weights{HitRatio: 0.4, Load: 0.3, Latency: 0.2, Freshness: 0.1}

// PickerConfig tunes a Picker. A zero field means its default.
type PickerConfig struct {
	Candidates     int           // nodes considered per key (Ring.LookupN); 0 means 3, at most 16
	Weights        Weights       // all zero means DefaultWeights; each must be >= 0
	HalfLife       time.Duration // a sample's weight halves every HalfLife; 0 means 10s
	MaxAge         time.Duration // a node whose last sample is older is unknown again; 0 means 1m
	UnhealthyFor   time.Duration // how long MarkUnhealthy excludes a node; 0 means 10s
	LatencyScale   time.Duration // the latency that scores 0.5; 0 means 1ms
	StalenessScale time.Duration // the staleness that scores 0.5; 0 means 1s
	// Tolerance spreads reads over near-equal nodes: Pick chooses at random
	// among the healthy candidates that score within Tolerance of the best.
	// 0 (the default) always returns the best, ties to ring order. In
	// [0, 1]; with DefaultWeights a score is in [0, 1].
	Tolerance float64
}

// Picker chooses, for each key, one of the key's first Candidates nodes in
// ring order, preferring the node with the best recent metrics. Without
// metrics it returns the ring's owner, so it agrees with Table.Lookup until
// someone calls Observe or MarkUnhealthy.
//
// A node's score is the weighted sum of four numbers in [0, 1], higher is
// better: the hit ratio, 1 - load, LatencyScale/(LatencyScale+latency) and
// StalenessScale/(StalenessScale+staleness). Each is a time-decayed average
// of its samples (half-life HalfLife) that slides back to the neutral 0.5 as
// the samples age (see docs/router.md), and is ignored after MaxAge. Ties go
// to the earlier node in ring order, unless Tolerance spreads them.
//
// Pick, Observe, MarkUnhealthy and MarkHealthy may be called concurrently;
// none of them takes a lock except Observe/Mark* on a node ID seen for the
// first time.
type Picker struct {
	table *Table
	cfg   PickerConfig

	// states maps node ID to its metrics. Copy-on-write: readers load the
	// map without locking; mu serializes the writers that add an ID.
	states atomic.Pointer[map[string]*nodeState]
	mu     sync.Mutex
}

type nodeState struct {
	stats          atomic.Pointer[stats] // nil until the first Observe
	unhealthyUntil atomic.Int64          // UnixNano; 0 when healthy
}

// stats is an immutable snapshot of a node's decayed sample sums.
type stats struct {
	at  time.Time  // time of the last sample; sums are decayed to it
	w   float64    // decayed number of samples
	sum [4]float64 // decayed sums of the four metric scores
}

// NewPicker returns a Picker over the rings of table.
func NewPicker(table *Table, cfg PickerConfig) (*Picker, error) {
	if table == nil {
		return nil, fmt.Errorf("router: NewPicker: nil table")
	}
	w := cfg.Weights
	switch {
	case cfg.Candidates < 0 || cfg.Candidates > maxCandidates:
		return nil, fmt.Errorf("router: Candidates %d must be in [0, %d]", cfg.Candidates, maxCandidates)
	case !(cfg.Tolerance >= 0 && cfg.Tolerance <= 1): // also rejects NaN
		return nil, fmt.Errorf("router: Tolerance %v must be in [0, 1]", cfg.Tolerance)
	case cfg.HalfLife < 0 || cfg.MaxAge < 0 || cfg.UnhealthyFor < 0 || cfg.LatencyScale < 0 || cfg.StalenessScale < 0:
		return nil, fmt.Errorf("router: negative duration in PickerConfig")
	case w.HitRatio < 0 || w.Load < 0 || w.Latency < 0 || w.Freshness < 0 ||
		math.IsNaN(w.HitRatio+w.Load+w.Latency+w.Freshness) || math.IsInf(w.HitRatio+w.Load+w.Latency+w.Freshness, 0):
		return nil, fmt.Errorf("router: Weights %+v must be finite and >= 0", w)
	}
	if w == (Weights{}) {
		cfg.Weights = DefaultWeights
	}
	cfg.Candidates = cmp.Or(cfg.Candidates, 3)
	cfg.HalfLife = cmp.Or(cfg.HalfLife, 10*time.Second)
	cfg.MaxAge = cmp.Or(cfg.MaxAge, time.Minute)
	cfg.UnhealthyFor = cmp.Or(cfg.UnhealthyFor, 10*time.Second)
	cfg.LatencyScale = cmp.Or(cfg.LatencyScale, time.Millisecond)
	cfg.StalenessScale = cmp.Or(cfg.StalenessScale, time.Second)
	p := &Picker{table: table, cfg: cfg}
	p.states.Store(&map[string]*nodeState{})
	return p, nil
}

// Observe records a sample of node nodeID taken now. Values out of range
// are clamped; samples for IDs not in the current ring are dropped.
func (p *Picker) Observe(nodeID string, m Sample) {
	if !p.table.Ring().has(nodeID) {
		return
	}
	x := [4]float64{
		clamp01(m.HitRatio),
		1 - clamp01(m.Load),
		scale(m.Latency, p.cfg.LatencyScale),
		scale(m.Staleness, p.cfg.StalenessScale),
	}
	st := p.state(nodeID)
	now := time.Now()
	for {
		old := st.stats.Load()
		next := &stats{at: now, w: 1, sum: x}
		if old != nil {
			d := p.decay(now.Sub(old.at))
			next.w = old.w*d + 1
			for i := range x {
				next.sum[i] = old.sum[i]*d + x[i]
			}
		}
		if st.stats.CompareAndSwap(old, next) {
			return
		}
	}
}

// MarkUnhealthy excludes node nodeID from Pick for UnhealthyFor, or until
// MarkHealthy. Calling it again extends the exclusion.
func (p *Picker) MarkUnhealthy(nodeID string) {
	if !p.table.Ring().has(nodeID) {
		return
	}
	p.state(nodeID).unhealthyUntil.Store(time.Now().Add(p.cfg.UnhealthyFor).UnixNano())
}

// MarkHealthy ends an exclusion started by MarkUnhealthy.
func (p *Picker) MarkHealthy(nodeID string) {
	if st := (*p.states.Load())[nodeID]; st != nil {
		st.unhealthyUntil.Store(0)
	}
}

// Pick returns the node to use for key: the best-scoring healthy node among
// the key's first Candidates nodes in ring order, or with Tolerance > 0 a
// random one of those that score within Tolerance of the best. If all of
// them are unhealthy it returns the first healthy node further along the
// ring. It returns false when the ring is empty or every node is unhealthy.
func (p *Picker) Pick(key string) (Node, bool) {
	r := p.table.Ring()
	var buf [maxCandidates]Node
	cands := r.LookupN(key, p.cfg.Candidates, buf[:0])
	if len(cands) == 0 {
		return Node{}, false
	}
	states := *p.states.Load()
	now := time.Now()
	nowNano := now.UnixNano()
	w := p.cfg.Weights
	neutral := 0.5 * (w.HitRatio + w.Load + w.Latency + w.Freshness)
	var scores [maxCandidates]float64
	best, bestScore := -1, 0.0
	for i, c := range cands {
		scores[i] = -1 // unhealthy
		st := states[c.ID]
		if st != nil && st.unhealthyUntil.Load() > nowNano {
			continue
		}
		score, ok := p.score(st, now)
		if !ok {
			score = neutral
		}
		scores[i] = score
		if best < 0 || score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		return p.firstHealthy(r, key, states, nowNano)
	}
	if tol := p.cfg.Tolerance; tol > 0 {
		// Reservoir sampling of one among the near-best, without a second
		// pass or a buffer.
		seen := 0
		for i := range cands {
			if scores[i] >= 0 && scores[i] >= bestScore-tol {
				if seen++; rand.IntN(seen) == 0 {
					best = i
				}
			}
		}
	}
	// Without any metrics all scores are equal and best is the first
	// healthy candidate: ring order.
	return cands[best], true
}

// firstHealthy walks the whole ring order of key; it runs only when all
// candidates are excluded, so its allocation does not matter.
func (p *Picker) firstHealthy(r *Ring, key string, states map[string]*nodeState, nowNano int64) (Node, bool) {
	for _, c := range r.LookupN(key, r.Len(), nil) {
		if st := states[c.ID]; st == nil || st.unhealthyUntil.Load() <= nowNano {
			return c, true
		}
	}
	return Node{}, false
}

// score returns st's score at now, or false when it has no samples younger
// than MaxAge.
func (p *Picker) score(st *nodeState, now time.Time) (float64, bool) {
	if st == nil {
		return 0, false
	}
	s := st.stats.Load()
	if s == nil {
		return 0, false
	}
	age := now.Sub(s.at)
	if age > p.cfg.MaxAge {
		return 0, false
	}
	// Confidence in the averages grows with the number of recent samples
	// and fades as they age: a lone sample counts half, a node reporting
	// every second with a 10s half-life counts 94%.
	wd := s.w * p.decay(age)
	conf := wd / (wd + 1)
	w := p.cfg.Weights
	ws := [4]float64{w.HitRatio, w.Load, w.Latency, w.Freshness}
	var score float64
	for i, wi := range ws {
		score += wi * (conf*s.sum[i]/s.w + (1-conf)*0.5)
	}
	return score, true
}

// decay returns the factor 2^(-age/HalfLife) by which old samples count.
func (p *Picker) decay(age time.Duration) float64 {
	if age <= 0 {
		return 1
	}
	return math.Exp2(-float64(age) / float64(p.cfg.HalfLife))
}

// state returns the state of id, adding it (and pruning IDs that left the
// ring) when it is new.
func (p *Picker) state(id string) *nodeState {
	if st := (*p.states.Load())[id]; st != nil {
		return st
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := *p.states.Load()
	if st := old[id]; st != nil {
		return st
	}
	r := p.table.Ring()
	next := make(map[string]*nodeState, len(old)+1)
	for k, v := range old {
		if r.has(k) {
			next[k] = v
		}
	}
	st := &nodeState{}
	next[id] = st
	p.states.Store(&next)
	return st
}

// has reports whether id is one of r's nodes.
func (r *Ring) has(id string) bool {
	_, ok := slices.BinarySearchFunc(r.nodes, id, func(n Node, id string) int { return cmp.Compare(n.ID, id) })
	return ok
}

func clamp01(x float64) float64 {
	if !(x > 0) { // also maps NaN to 0
		return 0
	}
	return min(x, 1)
}

// scale maps d >= 0 to (0, 1]: 1 at 0, 0.5 at ref, falling towards 0.
func scale(d, ref time.Duration) float64 {
	return float64(ref) / (float64(ref) + float64(max(d, 0)))
}
