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

// Access reporting. Every Get counts one read of its key and the size of the
// value it served; every Set and Delete counts one write (a Set with the
// size of the value written). They are summed per key in memory (a tally);
// a flusher goroutine sends the sums every interval as one or more binary
// batches (internal/wire, version 3: the instance's name, then one entry per
// key and op, with its bytes) to Kafka. Every effect interval it also sends
// the effect of the hot keys (effect.go) as version 4 batches, through the
// same sink. A Get never waits for the flusher or for Kafka:
//   - a hot key's reads and bytes are a striped atomic counter pair inside
//     its L1 entry (no lookup, no lock, no allocation; the stripe is picked
//     at random so two cores reading one key rarely share a cache line);
//   - any other key, and every write, is counted in a lock-striped table of
//     maps; a key already in the table costs a hash, an uncontended lock and
//     a map update.
// Memory is bounded: the table holds at most maxKeys keys between flushes. A
// stripe that fills up wakes the flusher at once; a new key that does not fit
// is dropped and counted. Batches waiting for Kafka are bounded in bytes too:
// when Kafka is slow or down, new batches are dropped and counted, never queued
// without bound.

const (
	countStripes = 64        // stripes of the cold-key table
	hitStripes   = 8         // counters per hot entry
	maxRecord    = 256 << 10 // bytes of one Kafka record, well under Kafka's 1 MB
	// defaultReportBuffer is the default bound of the bytes of records
	// handed to Kafka and not yet acknowledged (WithReportBuffer).
	defaultReportBuffer = 16 << 20
)

// stripedCount counts reads and the bytes they served, spread over cache
// lines; see hotEntry. A take between the two adds of one read may see its
// count without its bytes: the bytes then go with a later flush (drainHot
// puts back bytes that come without any count).
type stripedCount [hitStripes]struct {
	n     atomic.Uint64
	bytes atomic.Uint64
	_     [48]byte // one cache line each
}

func (s *stripedCount) add(n, bytes uint64) {
	st := &s[rand.Uint32()%hitStripes]
	st.n.Add(n)
	if bytes != 0 {
		st.bytes.Add(bytes)
	}
}

// take returns the sums and resets them.
func (s *stripedCount) take() (n, bytes uint64) {
	for i := range s {
		if s[i].n.Load() != 0 {
			n += s[i].n.Swap(0)
		}
		if s[i].bytes.Load() != 0 {
			bytes += s[i].bytes.Swap(0)
		}
	}
	return n, bytes
}

// tally is what one key saw since the last report.
type tally struct {
	reads, readBytes   uint64 // Gets, and the bytes of the values they served
	writes, writeBytes uint64 // Sets and Deletes, and the bytes Set wrote
}

// appendTally appends key's tally as version 2 batch entries, one per op
// that it saw, and returns how many it appended.
func appendTally(dst []wire.Access, key string, t tally) ([]wire.Access, int) {
	n := 0
	if t.reads > 0 {
		dst = append(dst, wire.Access{Key: key, Count: t.reads, Bytes: t.readBytes, Op: wire.OpRead})
		n++
	}
	if t.writes > 0 {
		dst = append(dst, wire.Access{Key: key, Count: t.writes, Bytes: t.writeBytes, Op: wire.OpWrite})
		n++
	}
	return dst, n
}

// maxEntryOverhead bounds the encoded size of a batch entry beyond its key:
// key length, count, op and bytes varints.
const maxEntryOverhead = 2 + 10 + 1 + 10

// sum is one key's count and bytes of one op since the last flush.
type sum struct{ n, bytes uint64 }

// countStripe holds a map per op rather than one map of tallies: a map
// value of 16 bytes instead of 32 keeps the table's memory close to what
// counting reads alone took, and writes are few.
type countStripe struct {
	mu    sync.Mutex        // guards m and spare
	m     [2]map[string]sum // by op (wire.OpRead, wire.OpWrite): key -> what it saw since the last flush
	spare [2]map[string]sum // the maps of the flush before last, cleared, reused to avoid allocation
	_     [24]byte
}

// countTable sums accesses of keys that are not hot, and writes.
type countTable struct {
	seed      maphash.Seed
	perStripe int // keys per stripe, reads and writes together
	stripes   [countStripes]countStripe
	dropped   atomic.Uint64 // accesses (reads and writes) of keys left out because the table was full
	wake      chan struct{} // poked (without blocking) when a stripe is full
}

func newCountTable(maxKeys int) *countTable {
	t := &countTable{seed: maphash.MakeSeed(), perStripe: max(maxKeys/countStripes, 1), wake: make(chan struct{}, 1)}
	for i := range t.stripes {
		for op := range 2 {
			t.stripes[i].m[op] = make(map[string]sum)
			t.stripes[i].spare[op] = make(map[string]sum)
		}
	}
	return t
}

// add counts n accesses of key of op (wire.OpRead or wire.OpWrite) that
// moved bytes.
func (t *countTable) add(key string, op wire.Op, n, bytes uint64) {
	s := &t.stripes[maphash.String(t.seed, key)%countStripes]
	s.mu.Lock()
	m := s.m[op&1]
	if c, ok := m[key]; ok {
		m[key] = sum{c.n + n, c.bytes + bytes}
		s.mu.Unlock()
		return
	}
	if used := len(s.m[0]) + len(s.m[1]); used < t.perStripe {
		m[key] = sum{n, bytes}
		full := used+1 == t.perStripe
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

// drain calls fn with every key and what it saw since the last drain (a key
// read and written comes twice: once with its reads, once with its writes)
// and empties the table. It swaps every stripe's maps first and reads them
// after, so that encoding the first stripes does not keep the last ones
// filling up. Only the flusher calls it.
func (t *countTable) drain(fn func(key string, t tally)) {
	var old [countStripes][2]map[string]sum
	for i := range t.stripes {
		s := &t.stripes[i]
		s.mu.Lock()
		old[i] = s.m
		s.m, s.spare = s.spare, [2]map[string]sum{}
		s.mu.Unlock()
	}
	for i, ms := range old {
		for k, c := range ms[wire.OpRead] {
			fn(k, tally{reads: c.n, readBytes: c.bytes})
		}
		for k, c := range ms[wire.OpWrite] {
			fn(k, tally{writes: c.n, writeBytes: c.bytes})
		}
		clear(ms[0])
		clear(ms[1])
		s := &t.stripes[i]
		s.mu.Lock()
		s.spare = ms
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
	src      string // the instance name, every batch's source
	every    time.Duration
	table    *countTable
	hot      func(fn func(key string, t tally)) // drains hot entries' counts
	sink     sink                               // nil: counts are summed and discarded
	m        *metrics
	entries  []wire.Access
	recBytes int
	last     time.Time // start of the interval being counted

	effectEvery time.Duration
	effects     func(dst []wire.Effect) []wire.Effect // takes the hot keys' effect; nil: not reported
	effBuf      []wire.Effect
	lastEffect  time.Time // start of the effect period being counted
}

// run flushes every interval, and early when the table fills, until ctx ends;
// then it flushes once more. It sends the hot keys' effect after the first
// flush that finds an effect interval gone by since the last effect report,
// and once more at the end.
//
// ctx ends the loop but cuts no send short: a flush under way when the
// Client closes, such as a first one still learning the topic's
// partitions, completes (the sink bounds each send), and so does the last.
func (r *reporter) run(ctx context.Context) {
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	r.lastEffect = time.Now()
	send := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			r.flush(send)
			r.flushEffects(send, time.Now())
			return
		case <-tick.C:
		case <-r.table.wake:
		}
		r.flush(send)
		if now := time.Now(); now.Sub(r.lastEffect) >= r.effectEvery {
			r.flushEffects(send, now)
		}
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
	add := func(key string, t tally) {
		if !wire.ValidKey(key) {
			r.m.reportDropped.WithLabelValues("bad_key").Add(float64(t.reads + t.writes))
			return
		}
		var n int
		r.entries, n = appendTally(r.entries, key, t)
		r.recBytes += n * (len(key) + maxEntryOverhead)
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
	rec := wire.AppendAccessesFrom(make([]byte, 0, r.recBytes+len(r.src)+64), r.app, r.src, start, r.entries)
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

// maxEffectOverhead bounds the encoded size of an effect entry beyond its
// key: key length and four count varints.
const maxEffectOverhead = 2 + 4*10

// flushEffects takes the hot keys' effect since the last call and sends it
// as effect batches (version 4) ending at now, each at most maxRecord bytes
// (one batch unless the hot set is large). A batch the sink refuses is
// dropped and its entries counted, as access batches are.
func (r *reporter) flushEffects(ctx context.Context, now time.Time) {
	if r.effects == nil {
		return
	}
	period := now.Sub(r.lastEffect).Milliseconds()
	r.lastEffect = now
	r.effBuf = r.effects(r.effBuf[:0])
	defer func() { clear(r.effBuf); r.effBuf = r.effBuf[:0] }()
	var sum wire.EffectCounts
	for _, e := range r.effBuf {
		sum.L1Hits += e.L1Hits
		sum.L2Reads += e.L2Reads
		sum.SourceLoads += e.SourceLoads
		sum.Limited += e.Limited
	}
	r.m.addEffect(sum)
	if r.sink == nil {
		return
	}
	for rest := r.effBuf; len(rest) > 0; {
		n, size := 0, len(r.app)+len(r.src)+64
		for n < len(rest) && (n == 0 || size+len(rest[n].Key)+maxEffectOverhead <= maxRecord) {
			size += len(rest[n].Key) + maxEffectOverhead
			n++
		}
		rec := wire.AppendEffects(make([]byte, 0, size), r.app, r.src, now.UnixMilli(), period, rest[:n])
		if err := r.sink.send(ctx, rec); err != nil {
			r.m.effectDropped.Add(float64(n))
		} else {
			r.m.effectBatches.Inc()
			r.m.reportBytes.Add(float64(len(rec)))
		}
		rest = rest[n:]
	}
}
