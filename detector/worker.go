package detector

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// round is one flush period. The flusher publishes the next round before it
// cancels the current one; each worker answers every round exactly once, in
// order, with a partial.
type round struct {
	id     uint64
	ctx    context.Context // canceled when the round ends
	cancel context.CancelFunc
	cutoff uint64 // the filter's per-partition cutoff during the round, in weight (see weights.go)
	// windowShare is a partition's share of a hot key's window, in weight
	// (counter.turning).
	windowShare uint64
	final       bool // written before cancel: workers stop after answering
}

// partial is one worker's answer to a round.
type partial struct {
	round     uint64
	partition TopicPartition
	counts    []Count // the worker's buffer: valid until it answers the next round
	offset    int64   // next offset to read; -1 if no record was counted yet
	rewound   bool    // the partition's log was replaced since the last answer (ErrRewound)
	keys      int     // keys in the worker's counter
	// Event time of the entries counted during the round, Unix ms, never
	// ahead of the clock (0, 0: none).
	oldest, newest int64
	// cuts divide counts by the steps of event time their entries had: each
	// but the last holds one step (see worker.cut). The last one's spread
	// is the worker's: valid until it answers the next round.
	cuts []cut
	// The sources of keys near the threshold, and the effects the apps
	// reported, per key and per instance, over the round (the worker's:
	// valid until it answers the next round).
	sources   []KeySources
	effects   []KeyEffect
	instances []InstanceEffect
}

// worker reads and counts one partition. It is the only goroutine that
// touches its counter.
type worker struct {
	d      *Detector
	claim  Claim
	tp     TopicPartition
	c      *counter
	dec    Decoder
	add    func(*wire.Entry)
	rounds *atomic.Pointer[round]
	out    chan<- partial
	early  chan<- uint64 // asks the flusher to end round id now (a key turned hot)
	next   uint64        // the round to answer next: the one counting now
	// The round's counts and cuts, and the previous round's, which the
	// flusher reads until the next answer.
	buf, sentBuf   []Count
	cuts, sentCuts []cut
	lag            prometheus.Gauge
	wg             weigher // the filter weights of each entry's app

	offset, hwm int64
	rewound     bool   // the partition's log was replaced since the last answer (ErrRewound)
	entries     uint64 // entries of the record being decoded
	stale       uint64 // of them, older than the window
	// oldestLive is the oldest event time still in the window, Unix ms:
	// older entries (a backlog replayed after a rebalance, a pause or an
	// outage) are not counted, since no window they could make hot is left.
	oldestLive int64

	// Event time, in Unix ms: recMs is the time of the record being decoded
	// (the default of entries without their own); oldest and newest bound
	// the entry times of the current round (0 when it has none), segOldest
	// and segNewest those of its current cut, whose entries' times lie in
	// [segFrom, segTo) (segTo 0: no entry yet).
	recMs, oldest, newest int64
	segOldest, segNewest  int64
	segFrom, segTo        int64
	nowMs                 int64 // the clock when the record was read, Unix ms
	// The current cut's accesses per step of event time, and the previous
	// round's last cut's, which the flusher reads until the next answer.
	spread, sent *spread
	// The round's sources and effects, and the previous round's, which the
	// flusher reads until the next answer. effectAt indexes effects by key,
	// instanceAt instances by source.
	sources, sentSources     []KeySources
	effects, sentEffects     []KeyEffect
	instances, sentInstances []InstanceEffect
	effectAt, instanceAt     map[appKey]int
}

func newWorker(d *Detector, cl Claim, parts int, rounds *atomic.Pointer[round], out chan<- partial, early chan<- uint64) *worker {
	cfg := d.cfg
	w := &worker{
		d:      d,
		claim:  cl,
		tp:     TopicPartition{Topic: cl.Topic(), Partition: cl.Partition()},
		c:      newCounter(int64(cfg.Bucket), int(cfg.Window/cfg.Bucket), cfg.MaxKeys/parts, cfg.MaxKeyBytes/parts),
		rounds: rounds,
		out:    out,
		early:  early,
		lag:    d.m.lag.WithLabelValues(cl.Topic(), strconv.Itoa(cl.Partition())),
		offset: -1,
	}
	step := max(cfg.Bucket.Milliseconds(), 1)
	w.spread, w.sent = &spread{step: step}, &spread{step: step}
	w.c.bucketHot = min(cfg.hotWeight(cfg.Bucket), math.MaxUint32) // a bucket's weight saturates there
	w.c.windowHot = cfg.hotWeight(cfg.Window)
	w.dec = d.decoder(cl.Topic(), w.addEffect)
	w.add = func(e *wire.Entry) {
		w.entries++
		ts := e.TS
		if ts <= 0 {
			ts = w.recMs
		}
		if ts < w.oldestLive {
			w.stale++
			return
		}
		ts = min(ts, w.nowMs) // an entry time ahead of this clock counts as now
		if ts < w.segFrom || ts >= w.segTo {
			w.cut(ts)
		}
		w.spread.add(ts, e.Count)
		w.c.count(e, w.wg.of(e.App))
		if w.segOldest == 0 || ts < w.segOldest {
			w.segOldest = ts
		}
		w.segNewest = max(w.segNewest, ts)
		if w.oldest == 0 || ts < w.oldest {
			w.oldest = ts
		}
		w.newest = max(w.newest, ts)
	}
	return w
}

// run reads the partition until a final round, then waits for the
// generation to end (so that the group does not rebalance before every
// goroutine of this generation is done).
func (w *worker) run(gctx context.Context) {
	defer w.d.m.lag.DeleteLabelValues(w.tp.Topic, strconv.Itoa(w.tp.Partition))
	defer w.claim.Close()
	for {
		r := w.rounds.Load()
		w.c.cutoff = r.cutoff
		if r.windowShare != w.c.windowShare {
			w.c.setShare(r.windowShare)
		}
		if r.id > w.next {
			// Round next ended (the flusher published r before ending
			// it) while this worker was busy: answer it now. It was not
			// final, or no later round would exist.
			w.answer(w.next, false)
			w.next++
			continue
		}
		rec, err := w.claim.Fetch(r.ctx)
		if err == nil {
			w.consume(rec)
			continue
		}
		if errors.Is(err, ErrRewound) {
			// Whether or not the round ended meanwhile: the claim has
			// moved to the new log, and this round's answer says so.
			w.offset, w.hwm, w.rewound = -1, 0, true
			w.d.log.Warn("detector: the partition's log was replaced (its topic deleted and created again, or the log cut back); counting the new one",
				"topic", w.tp.Topic, "partition", w.tp.Partition, "err", err)
			continue
		}
		if r.ctx.Err() == nil {
			w.d.m.fetchErrs.Inc()
			w.d.log.Warn("detector: fetch failed; retrying", "topic", w.tp.Topic, "partition", w.tp.Partition, "err", err)
			// Short: after a broker restart, every 250 ms of waiting
			// here delays detection.
			t := time.NewTimer(250 * time.Millisecond)
			select {
			case <-r.ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		w.answer(r.id, r.final)
		w.next = r.id + 1
		if r.final {
			<-gctx.Done()
			return
		}
	}
}

func (w *worker) consume(rec Record) {
	now := time.Now()
	w.c.advance(now.UnixNano())
	w.wg.reset(w.d.weights.Load())
	w.entries, w.stale = 0, 0
	w.recMs = now.UnixMilli()
	w.nowMs = w.recMs
	w.oldestLive = math.MinInt64
	if age := w.d.cfg.MaxAge; age > 0 {
		w.oldestLive = w.recMs - age.Milliseconds()
	}
	if !rec.Time.IsZero() {
		w.recMs = rec.Time.UnixMilli()
	}
	err := w.dec.Decode(rec.Value, w.add)
	w.d.m.records.Inc()
	w.d.m.entries.Add(float64(w.entries - w.stale))
	w.d.m.stale.Add(float64(w.stale))
	if err != nil {
		// Counted by reason in OnInvalid; the record (or line) is skipped.
		w.d.log.Debug("detector: invalid record", "topic", w.tp.Topic, "partition", w.tp.Partition, "offset", rec.Offset, "err", err)
	}
	w.offset = rec.Offset + 1
	if rec.HighWaterMark > 0 {
		w.hwm = rec.HighWaterMark
	}
	// A key that turned hot in this record asks for its round to end now
	// rather than at the next tick (docs/detector.md, "Early rounds"). The
	// flusher ignores a request for a round that has ended already.
	w.c.drainBig()
	if w.c.takeEarly() {
		select {
		case w.early <- w.next:
		default: // requests are pending already
		}
	}
}

// maxCuts bounds the cuts of a partition's round (see worker.cut).
const maxCuts = 4

// A cut is a stretch of a partition's round: the counts flushed at its end,
// which the flusher sends with the event time of its entries, rather than
// with that of the whole round (see group).
type cut struct {
	end            int   // its counts end at this index of the round's
	oldest, newest int64 // event time of its entries, Unix ms (0, 0: none)
	// Its accesses: n, all in the step of oldest, or, for the round's last
	// cut, spread over steps.
	n      uint64
	spread *spread
}

// cut starts a new cut of the round for an entry at event time ts outside
// the current cut's step: the counter's counts so far are flushed and close
// the current cut, if it has entries, so that each cut holds the accesses
// of one step of event time. A partition reading two producers' batches
// 100 ms apart in one round sends each batch's keys at its own step; with
// one cut, all of them were spread over both steps, and a key's accesses
// put on the wrong side of a window's edge read 5 % off (issue 41). Past
// maxCuts the round's last cut takes every step (a backlog).
func (w *worker) cut(ts int64) {
	if w.segTo != 0 {
		if len(w.cuts) == maxCuts-1 {
			w.segFrom, w.segTo = math.MinInt64, math.MaxInt64
			return
		}
		w.buf = w.c.flush(w.buf, false)
		w.cuts = append(w.cuts, cut{end: len(w.buf), oldest: w.segOldest, newest: w.segNewest, n: w.spread.sum()})
		w.spread.reset()
		w.segOldest, w.segNewest = 0, 0
	}
	step := w.spread.step
	w.segFrom = ts / step * step
	w.segTo = w.segFrom + step
}

// answer hands the round's counts and the partition's offset to the flusher.
func (w *worker) answer(id uint64, final bool) {
	now := time.Now().UnixNano()
	w.c.advance(now)
	w.buf = w.c.flush(w.buf, final)
	w.cuts = append(w.cuts, cut{end: len(w.buf), oldest: w.segOldest, newest: w.segNewest, spread: w.spread})
	w.c.takeEarly() // a key that turned hot is in this answer
	s := w.c.takeStats()
	m := w.d.m
	m.filtered.Add(float64(s.filtered))
	m.capDropped.Add(float64(s.capDropped))
	m.admitted.Add(float64(s.admitted))
	if w.offset >= 0 && w.hwm > 0 {
		w.lag.Set(float64(max(w.hwm-w.offset, 0)))
	}
	// Entry times were clamped to the clock as they were counted.
	w.sources = w.c.takeSources(w.sources[:0], now, final)
	w.out <- partial{round: id, partition: w.tp, counts: w.buf, offset: w.offset, rewound: w.rewound, keys: w.c.len(),
		oldest: w.oldest, newest: w.newest, cuts: w.cuts, sources: w.sources, effects: w.effects,
		instances: w.instances}
	w.oldest, w.newest, w.rewound = 0, 0, false
	w.segOldest, w.segNewest, w.segFrom, w.segTo = 0, 0, 0, 0
	w.buf, w.sentBuf = w.sentBuf[:0], w.buf
	w.cuts, w.sentCuts = w.sentCuts[:0], w.cuts
	w.spread, w.sent = w.sent, w.spread
	w.spread.reset()
	w.sources, w.sentSources = w.sentSources, w.sources
	w.effects, w.sentEffects = w.sentEffects[:0], w.effects
	w.instances, w.sentInstances = w.sentInstances[:0], w.instances
	clear(w.effectAt)
	clear(w.instanceAt)
}

// addEffect sums an effect report into the round's effects: per key, and
// per instance when the report names its instance.
func (w *worker) addEffect(e *wire.EffectEntry) {
	app := string(e.App)
	addCounts(&sumFor(&w.effectAt, &w.effects, appKey{app, string(e.Key)}, func(k appKey) KeyEffect {
		return KeyEffect{App: k.app, Key: k.key}
	}).Effect, e)
	if len(e.Src) > 0 {
		addCounts(&sumFor(&w.instanceAt, &w.instances, appKey{app, string(e.Src)}, func(k appKey) InstanceEffect {
			return InstanceEffect{App: k.app, Instance: k.key}
		}).Effect, e)
	}
}

// sumFor returns the entry of k in *list, which *at indexes, appending
// fresh(k) first when k has none.
func sumFor[T any](at *map[appKey]int, list *[]T, k appKey, fresh func(appKey) T) *T {
	i, ok := (*at)[k]
	if !ok {
		if *at == nil {
			*at = make(map[appKey]int)
		}
		i = len(*list)
		(*at)[k] = i
		*list = append(*list, fresh(k))
	}
	return &(*list)[i]
}

// addCounts adds e's counts to x, saturating.
func addCounts(x *shardapi.Effect, e *wire.EffectEntry) {
	x.L1Hits = satAdd(x.L1Hits, e.L1Hits)
	x.L2Reads = satAdd(x.L2Reads, e.L2Reads)
	x.SourceLoads = satAdd(x.SourceLoads, e.SourceLoads)
	x.Limited = satAdd(x.Limited, e.Limited)
}
