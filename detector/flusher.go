package detector

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"time"
)

// flusher ends a round every Flush tick, merges the workers' partials, hands
// them to the Sink and then, once per CommitInterval, commits the offsets
// they cover. A worker that counted a key turning hot may end a round before
// its tick (an early round, at most one per tick); an early round's offsets
// are committed with a later tick's round, so offsets are committed at most
// once per Flush.
type flusher struct {
	d        *Detector
	gen      Generation
	workers  int
	fail     func(error)
	current  atomic.Pointer[round]
	partials chan partial
	early    chan uint64 // rounds the workers ask to end now
	nextID   uint64

	parts      []partial                // the round's partials
	pieces     []piece                  // their cuts
	order      []*piece                 // scratch of group
	groups     []*group                 // the round's counts, one Flush each, oldest first
	step       int64                    // Bucket in milliseconds: the step of the spreads
	sources    []KeySources             // the workers' sources of the round, side by side (a key may repeat)
	effects    []KeyEffect              // the same of the effects
	instances  []InstanceEffect         // and of the effects per instance
	reach      int64                    // the last event time of the partitions that are late, Unix ms; 0: none (see stalls)
	stalls     *stalls                  // each partition's cadence, for reach
	offsets    map[TopicPartition]int64 // partition -> next offset to read, as of the last round
	taken      map[TopicPartition]int64 // the same as of the last round the Sink took
	committed  map[TopicPartition]int64 // partition -> last offset committed
	toCommit   map[TopicPartition]int64
	lastCommit time.Time // when a commit was last taken
}

type appKey struct{ app, key string }

func newFlusher(d *Detector, gen Generation, workers int, fail func(error)) *flusher {
	f := &flusher{
		d:         d,
		gen:       gen,
		workers:   workers,
		fail:      fail,
		partials:  make(chan partial, workers),
		early:     make(chan uint64, workers),
		offsets:   make(map[TopicPartition]int64),
		taken:     make(map[TopicPartition]int64),
		committed: make(map[TopicPartition]int64),
		toCommit:  make(map[TopicPartition]int64),
		step:      max(d.cfg.Bucket.Milliseconds(), 1),
		stalls:    newStalls(d.cfg),
	}
	f.publish()
	return f
}

// publish starts the next round.
func (f *flusher) publish() *round {
	n := 1
	if f.d.cfg.Detectors != nil {
		n = max(f.d.cfg.Detectors(), 1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &round{id: f.nextID, ctx: ctx, cancel: cancel, cutoff: f.d.cfg.cutoff(n, f.workers),
		windowShare: f.d.cfg.windowShare(n, f.workers)}
	f.nextID++
	f.current.Store(r)
	return r
}

// run ends a round every tick, and early when a worker asks, until runCtx
// or the generation ends; the last round is final. Then it waits for the
// generation to end.
func (f *flusher) run(runCtx, gctx context.Context) {
	t := time.NewTicker(f.d.cfg.Flush)
	defer t.Stop()
	defer func() { <-gctx.Done() }()
	defer func() {
		f.d.handedOn(f.taken)
		f.d.leftCadences(f.stalls.parts)
	}()
	prev := time.Now()   // when the previous round ended (its tick, or early)
	unconfirmed := false // the process stood still and no commit was taken since
	earlyOK := true      // no early round since the last tick
	for {
		r := f.current.Load()
		early := f.wait(runCtx, gctx, t.C, r, earlyOK)
		earlyOK = !early
		if early {
			f.d.m.earlyRounds.Inc()
		}
		at := time.Now()
		if !r.final {
			f.publish()
		}
		r.cancel()
		f.collect(r.id)
		// Measured from the previous round's tick to now, after collect: a
		// process frozen anywhere in between is caught, whether it waited
		// for the tick, collected this round (its workers then read on,
		// after the resume, from partitions that may be another member's
		// by now) or was still sending or committing the previous one.
		var err error
		if time.Since(prev) >= f.d.cfg.fenceAfter {
			unconfirmed = true
		}
		if unconfirmed {
			unconfirmed, err = f.fence(runCtx, gctx)
		}
		prev = at
		if err == nil {
			err = f.send(runCtx, gctx, at)
		}
		if err != nil {
			if runCtx.Err() != nil {
				f.fail(err) // shutdown with counts not handed on: Run reports it
			} else {
				f.d.log.Warn("detector: counts dropped uncommitted", "err", err)
			}
			// The rounds before this one were taken, and may not all be
			// committed yet (CommitInterval): commit them, or the next owner,
			// reading on at once, would count them again. (Refused if the
			// generation is over: then they are read again.)
			_ = f.commit(f.taken, false)
			if !r.final {
				// Stop the workers; what they read is not committed.
				nr := f.current.Load()
				nr.final = true
				nr.cancel()
				f.collect(nr.id)
			}
			return
		}
		// A commit is a log append on the broker and, through kafka-go, a
		// FindCoordinator request too: the costliest thing the detector
		// asks of it. So offsets are committed by a tick's round once per
		// CommitInterval, and at the generation's end, so that the next
		// owner reads on from exactly here.
		if r.final || !early && time.Since(f.lastCommit) >= f.d.cfg.CommitInterval {
			_ = f.commit(f.taken, false) // logged; a failed commit is retried with the next round's offsets
		}
		if r.final {
			return
		}
	}
}

// wait blocks until round r is to end: at the tick, when runCtx or the
// generation ends (r is then final), or, if earlyOK, when a worker asks to
// end r because a key turned hot in it (then it returns true). Other
// requests are dropped: those for rounds that have ended already (their
// counts went out) and, after an early round, those until the next tick.
func (f *flusher) wait(runCtx, gctx context.Context, tick <-chan time.Time, r *round, earlyOK bool) (early bool) {
	for {
		select {
		case <-tick:
			return false
		case id := <-f.early:
			if earlyOK && id == r.id {
				return true
			}
		case <-gctx.Done():
			r.final = true
			return false
		case <-runCtx.Done():
			r.final = true
			return false
		}
	}
}

// fenceGap is the time since the previous round's tick (normally about
// Flush) after which a round is fenced before it is sent: the process was
// frozen (SIGSTOP, a paused VM) or starved for that long, and the
// coordinator may have ended this member's generation meanwhile and handed
// its partitions to another member, which reads the same records again
// from the last committed offset. It is well below any sensible session
// timeout (tests use 6 s).
const fenceGap = 2 * time.Second

// fence commits every partition's offset before the round's counts are
// sent, retrying every Flush until the commit is taken or the generation
// ends. The coordinator takes a commit only from a member of the current
// generation, so a taken commit proves the partitions are still this
// member's, and no later owner reads these records again; a member the group
// has dropped never sends counts another member also counts (issue 9: a
// process resumed after a pause published 1.2× the true rate). The offsets
// are committed even when they have not moved: the first round after a
// standstill often read nothing new yet, and the round after it would read
// on from partitions that may be another member's by now. A generation that
// has read nothing has nothing to commit and nothing to count: the round
// goes out and the next one is fenced again (unconfirmed is true).
//
// The price is that counts whose send then fails for good are lost instead
// of replayed. A round already being sent when the process froze cannot be
// fenced: up to one round per partition may still be counted twice.
func (f *flusher) fence(runCtx, gctx context.Context) (unconfirmed bool, err error) {
	if len(f.offsets) == 0 {
		return true, nil
	}
	for {
		err := f.commit(f.offsets, true)
		if err == nil {
			return false, nil
		}
		f.d.log.Warn("detector: process stood still; its counts wait until the group confirms its partitions", "err", err)
		select {
		case <-gctx.Done():
			return true, fmt.Errorf("detector: generation ended while the process stood still, %d counts dropped: %w", f.counts(), err)
		case <-runCtx.Done():
			return true, fmt.Errorf("detector: stopped while the process stood still, %d counts dropped: %w", f.counts(), err)
		case <-time.After(f.d.cfg.Flush):
		}
	}
}

// collect receives every worker's partial for round id and merges them
// into groups.
func (f *flusher) collect(id uint64) {
	clear(f.sources)
	clear(f.effects)
	clear(f.instances)
	f.sources, f.effects, f.instances = f.sources[:0], f.effects[:0], f.instances[:0]
	clear(f.parts)
	f.parts = f.parts[:0]
	keys := 0
	var newest int64
	now := time.Now()
	for range f.workers {
		p := <-f.partials
		if p.round != id {
			// A broken round protocol would lose or double counts: fail loudly.
			panic(fmt.Sprintf("detector: partition %v answered round %d during round %d", p.partition, p.round, id))
		}
		f.stalls.see(p.partition, id, p.newest, now)
		keys += p.keys
		newest = max(newest, p.newest)
		if p.rewound {
			// The offsets of the old log mean nothing for the new one:
			// the new log's may be committed and handed on though lower.
			delete(f.offsets, p.partition)
			delete(f.taken, p.partition)
			delete(f.committed, p.partition)
			f.d.forget(p.partition)
		}
		if p.offset >= 0 {
			f.offsets[p.partition] = p.offset
		}
		f.sources = append(f.sources, p.sources...)
		f.effects = append(f.effects, p.effects...)
		f.instances = append(f.instances, p.instances...)
		f.parts = append(f.parts, p)
	}
	f.group()
	if len(f.groups) > 1 {
		f.d.m.splitRounds.Inc()
	}
	f.d.m.keys.Set(float64(keys))
	// A group's counts happened between the oldest and the newest event
	// time its entries carry, and the aggregator spreads them evenly over
	// that stretch: a live round covers the event times it read (nothing
	// when one record's entries share one time), the first round of a
	// generation reading the backlog a dead or paused owner left, or a
	// partition catching up, the whole stretch back to its oldest. The
	// stretch is never extended back to the previous round's newest: a
	// partition that gets a record only now and then (a producer flushing
	// every 100 ms, a detector owning few of many partitions) would smear
	// its counts back over buckets the aggregators have already evaluated,
	// and every evaluated window would miss the part of them still to come
	// (rates read 10 % low and more; docs/aggregator.md, "Rate"). Event
	// times are compared with the clocks of this process (MaxAge) and of
	// the aggregators: producers' and hotspotd's clocks must agree to well
	// under a bucket (docs/detector.md). The spread says how the counts lie
	// in that stretch, per Bucket of event time, so that the aggregators
	// place them where they happened: a backlog's few records far apart
	// are not spread over the stretch between them, which other
	// partitions' records have filled; and a lagging partition's counts,
	// in a group of their own, are not spread over the others' steps.
	// A late partition's accesses after its last event time are still to
	// come: the round's reach stops there (see stalls).
	reach, late := f.stalls.reach(id, now)
	f.d.m.late.Set(float64(late))
	f.reach = 0
	if reach > 0 && (newest == 0 || reach < newest) {
		f.reach = reach
	}
}

// shutdownSend bounds the retries of the last counts once Run is canceled
// (with SendTimeout): a process told to stop must stop; its partitions' next
// owner reads the uncommitted records again.
const shutdownSend = 5 * time.Second

// send hands the round's groups to the Sink, one Flush each, oldest first
// (an aggregator's reach for this detector then never passes counts still to
// come), retrying each with backoff until the Sink takes it. It gives up
// only when the generation ends (the partitions' next owner reads the
// records again, so these counts must not be sent late) or, once runCtx
// ended, after shutdownSend more. A Sink failing for SendTimeout makes the
// detector unhealthy, not the process exit: the co-located aggregator and
// API stay up, and counting resumes when an aggregator is back. An empty
// round is sent too: it tells the aggregators this detector is running (they
// pause demotions while every detector is silent).
//
// Given up after some of a round's groups were taken, the round's records
// are read again by the next owner and those groups counted twice: the same
// bound as a round whose batch one aggregator took and another refused.
func (f *flusher) send(runCtx, gctx context.Context, at time.Time) error {
	var stop <-chan time.Time // after runCtx ended: the last SendTimeout
	keys := 0
	for i, g := range f.groups {
		fl := Flush{At: at, Span: g.span(), Seq: f.d.seq.Add(1)}
		if i == 0 {
			fl.Sources, fl.Effects, fl.Instances = f.sources, f.effects, f.instances
		}
		if f.reach > 0 {
			fl.Reach = time.UnixMilli(f.reach)
		}
		if g.newest > 0 {
			fl.End = time.UnixMilli(g.newest)
			fl.Step, fl.Weights = time.Duration(f.step)*time.Millisecond, g.spread.weights()
		}
		if err := f.sendFlush(runCtx, gctx, at, fl, g.counts, &stop); err != nil {
			return err
		}
		keys += len(g.counts)
	}
	maps.Copy(f.taken, f.offsets)
	f.d.m.flushSecs.Observe(time.Since(at).Seconds())
	f.d.m.flushKeys.Observe(float64(keys))
	return nil
}

// sendFlush hands one Flush of round at to the Sink (see send). stop is
// the shutdown deadline, set once runCtx has ended, shared by the round's
// flushes.
func (f *flusher) sendFlush(runCtx, gctx context.Context, at time.Time, fl Flush, counts []Count, stop *<-chan time.Time) error {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		limit := f.d.cfg.SendTimeout
		if *stop != nil {
			limit = min(limit, shutdownSend)
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), limit)
		err := f.d.sink.Send(ctx, fl, counts)
		cancel()
		if err == nil {
			f.d.healthy(nil)
			return nil
		}
		f.d.m.sendErrs.Inc()
		if time.Since(at) >= f.d.cfg.SendTimeout {
			f.d.healthy(fmt.Errorf("detector: sink refused counts for %v: %w", time.Since(at).Round(time.Second), err))
		}
		f.d.log.Warn("detector: sink refused counts; retrying", "keys", len(counts), "attempt", attempt, "err", err)
		if *stop == nil && runCtx.Err() != nil {
			*stop = time.After(min(f.d.cfg.SendTimeout, shutdownSend))
		}
		t := time.NewTimer(backoff)
		ended, canceled := gctx.Done(), runCtx.Done()
		if *stop != nil {
			// Close ends the generation: these are the last counts.
			ended, canceled = nil, nil
		}
		select {
		case <-ended:
			t.Stop()
			return fmt.Errorf("detector: generation ended with %d counts not taken by the sink, offsets left uncommitted: %w",
				len(counts), err)
		case <-*stop:
			t.Stop()
			return fmt.Errorf("detector: sink refused %d counts at shutdown, offsets left uncommitted: %w", len(counts), err)
		case <-canceled:
			t.Stop()
			*stop = time.After(min(f.d.cfg.SendTimeout, shutdownSend))
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// commit stores those of offsets that moved on since the last commit, or all
// of them if all is set; it never moves an offset back (after a fenced
// round whose send failed, the rounds taken are behind what was committed).
// A failed commit is retried with a later round's offsets; the counts were
// handed on, so a replay after it can only over-count.
func (f *flusher) commit(offsets map[TopicPartition]int64, all bool) error {
	clear(f.toCommit)
	for p, o := range offsets {
		if c, ok := f.committed[p]; !ok || c < o || all && c == o {
			f.toCommit[p] = o
		}
	}
	if len(f.toCommit) == 0 {
		return nil
	}
	// Bounded well below the rebalance timeout: a commit must never keep
	// this generation alive through a rebalance.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := f.gen.Commit(ctx, f.toCommit); err != nil {
		f.d.m.commitErrs.Inc()
		f.d.log.Warn("detector: offset commit failed", "err", err)
		return err
	}
	for p, o := range f.toCommit {
		f.committed[p] = o
	}
	f.lastCommit = time.Now()
	return nil
}
