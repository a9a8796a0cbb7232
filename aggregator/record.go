package aggregator

import (
	"time"

	"github.com/hotspot-dev/hotspot/hotset/decision"
)

// Recorder is told every decision of the shard (history, webhooks). Record
// runs on the shard's sweep loop, so it must not block: an implementation
// queues and drops (and counts) what it cannot keep up with. It may keep ds
// but must not modify it.
type Recorder interface {
	Record(ds []decision.Decision)
}

// decide queues a decision for the Recorder. The caller holds t.mu.
func (t *table) decide(e *entry, kind string, now time.Time) {
	if !t.p.record {
		return
	}
	t.decided = append(t.decided, decision.Decision{
		App: e.app.name, Key: e.key, Kind: kind, At: now,
		Rate: t.rate(e, now), Rule: e.r.eff.Index,
	})
}

// takeDecided returns the decisions made since the last call at now. A
// promotion carries the key's busiest sources as they are now: a sweep
// after it at most, so that those of the round that made the key hot,
// merged after its counts, are in.
func (t *table) takeDecided(now time.Time) []decision.Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	ds := t.decided
	t.decided = nil
	for i := range ds {
		if ds[i].Kind == decision.Promoted {
			ds[i].Sources = t.promotedSources(ds[i].App, ds[i].Key, now)
		}
	}
	return ds
}

// record hands the decisions made so far to the Recorder. It runs on the
// loop goroutine, after the publication they caused was attempted.
func (a *Aggregator) record() {
	if a.cfg.Recorder == nil {
		return
	}
	if ds := a.t.takeDecided(time.Now()); len(ds) > 0 {
		a.cfg.Recorder.Record(ds)
	}
}
