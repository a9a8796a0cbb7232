package hotcache

import (
	"context"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// Access reporting. Every Get counts one access of its key, summed per key
// in memory; a flusher goroutine sends the sums every interval as one or more
// binary batches (internal/wire) to Kafka. A Get never waits for the flusher
// or for Kafka:
//   - a hot key's count is a striped atomic counter inside its L1 entry (no
//     lookup, no lock, no allocation; the stripe is picked at random so two
//     cores reading one key rarely share a cache line);
//   - any other key is counted in a lock-striped table of maps; a key already
//     in the table costs a hash, an uncontended lock and a map update.
// Memory is bounded: the table holds at most maxKeys keys between flushes. A
// stripe that fills up wakes the flusher at once; a new key that does not fit
// is dropped and counted. Batches waiting for Kafka are bounded in bytes too:
// when Kafka is slow or down, new batches are dropped and counted, never queued
// without bound.

const (
	countStripes = 64        // stripes of the cold-key table
	hitStripes   = 8         // counters per hot entry
	maxRecord    = 256 << 10 // bytes of one Kafka record, well under Kafka's 1 MB
	maxInflight  = 16 << 20  // bytes of records handed to Kafka and not yet acknowledged
)

// stripedCount is a counter spread over cache lines; see hotEntry.
type stripedCount [hitStripes]struct {
	n atomic.Uint64
	_ [56]byte // one cache line each
}

func (s *stripedCount) add(n uint64) { s[rand.Uint32()%hitStripes].n.Add(n) }

// take returns the sum and resets it.
func (s *stripedCount) take() uint64 {
	var sum uint64
	for i := range s {
		if s[i].n.Load() != 0 {
			sum += s[i].n.Swap(0)
		}
	}
	return sum
}

type countStripe struct {
	mu    sync.Mutex        // guards m and spare
	m     map[string]uint64 // key -> accesses since the last flush
	spare map[string]uint64 // the map of the flush before last, cleared, reused to avoid allocation
	_     [40]byte
}

// countTable sums accesses of keys that are not hot.
type countTable struct {
	seed      maphash.Seed
	perStripe int
	stripes   [countStripes]countStripe
	dropped   atomic.Uint64 // accesses of keys left out because the table was full
	wake      chan struct{} // poked (without blocking) when a stripe is full
}

func newCountTable(maxKeys int) *countTable {
	t := &countTable{seed: maphash.MakeSeed(), perStripe: max(maxKeys/countStripes, 1), wake: make(chan struct{}, 1)}
	for i := range t.stripes {
		t.stripes[i].m = make(map[string]uint64)
		t.stripes[i].spare = make(map[string]uint64)
	}
	return t
}

func (t *countTable) add(key string, n uint64) {
	s := &t.stripes[maphash.String(t.seed, key)%countStripes]
	s.mu.Lock()
	if c, ok := s.m[key]; ok {
		s.m[key] = c + n
		s.mu.Unlock()
		return
	}
	if len(s.m) < t.perStripe {
		s.m[key] = n
		full := len(s.m) == t.perStripe
		s.mu.Unlock()
		if full {
			t.poke()
		}
		return
	}
	s.mu.Unlock()
	t.dropped.Add(n)
	t.poke()
}

func (t *countTable) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// drain calls fn with every (key, count) counted since the last drain and
// empties the table. It swaps every stripe's map first and reads them after,
// so that encoding the first stripes does not keep the last ones filling up.
// Only the flusher calls it.
func (t *countTable) drain(fn func(key string, n uint64)) {
	var old [countStripes]map[string]uint64
	for i := range t.stripes {
		s := &t.stripes[i]
		s.mu.Lock()
		old[i] = s.m
		s.m, s.spare = s.spare, nil
		s.mu.Unlock()
	}
	for i, m := range old {
		for k, n := range m {
			fn(k, n)
		}
		clear(m)
		s := &t.stripes[i]
		s.mu.Lock()
		s.spare = m
		s.mu.Unlock()
	}
}

// sink takes encoded batches; kafkaSink is the real one.
type sink interface {
	send(ctx context.Context, record []byte) error
	close() error
}

// reporter owns the flush loop.
type reporter struct {
	app      string
	every    time.Duration
	table    *countTable
	hot      func(fn func(key string, n uint64)) // drains hot entries' counts
	sink     sink                                // nil: counts are summed and discarded
	m        *metrics
	entries  []wire.KeyCount
	recBytes int
	last     time.Time // start of the interval being counted
}

// run flushes every interval, and early when the table fills, until ctx ends;
// then it flushes once more.
func (r *reporter) run(ctx context.Context) {
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			r.flush(context.WithoutCancel(ctx))
			return
		case <-tick.C:
		case <-r.table.wake:
		}
		r.flush(ctx)
	}
}

func (r *reporter) flush(ctx context.Context) {
	now := time.Now()
	if r.last.IsZero() {
		r.last = now.Add(-r.every)
	}
	start := r.last.UnixMilli()
	r.last = now
	r.entries, r.recBytes = r.entries[:0], 0
	add := func(key string, n uint64) {
		r.entries = append(r.entries, wire.KeyCount{Key: key, Count: n})
		r.recBytes += len(key) + 12
		if r.recBytes >= maxRecord {
			r.emit(ctx, start)
		}
	}
	r.hot(add)
	r.table.drain(add)
	r.emit(ctx, start)
	if d := r.table.dropped.Swap(0); d > 0 {
		r.m.reportDropped.WithLabelValues("full").Add(float64(d))
	}
}

func (r *reporter) emit(ctx context.Context, start int64) {
	if len(r.entries) == 0 {
		return
	}
	defer func() { r.entries, r.recBytes = r.entries[:0], 0 }()
	if r.sink == nil {
		return
	}
	rec := wire.AppendBatch(make([]byte, 0, r.recBytes+64), r.app, start, r.entries)
	if err := r.sink.send(ctx, rec); err != nil {
		var n uint64
		for _, e := range r.entries {
			n += e.Count
		}
		r.m.reportDropped.WithLabelValues("kafka").Add(float64(n))
		return
	}
	r.m.reportBatches.Inc()
	r.m.reportBytes.Add(float64(len(rec)))
}
