package aggregator

import (
	"time"
)

// Kinds of Decision.
const (
	Promoted = "promoted" // the key turned hot
	Demoted  = "demoted"  // the key turned cold
)

// DefaultRule is the rule index of the default rule (hotspotd's threshold
// and window), which keys that no rule of their app matches follow.
const DefaultRule = -1

// Decision is one promotion or demotion this shard decided.
type Decision struct {
	App  string
	Key  string
	Kind string    // Promoted or Demoted
	At   time.Time // when the shard decided it, on its clock
	Rate float64   // the rule's quantity per second (accesses or bytes) over its window at the decision
	Rule int       // index of the app's rule that decided it; DefaultRule for the default
}

// Recorder is told every decision of the shard (history, webhooks). Record
// runs on the shard's sweep loop, so it must not block: an implementation
// queues and drops (and counts) what it cannot keep up with. It may keep ds
// but must not modify it.
type Recorder interface {
	Record(ds []Decision)
}

// decide queues a decision for the Recorder. The caller holds t.mu.
func (t *table) decide(e *entry, kind string, now time.Time) {
	if !t.p.record {
		return
	}
	t.decided = append(t.decided, Decision{
		App: e.app.name, Key: e.key, Kind: kind, At: now,
		Rate: t.rate(e, now), Rule: e.r.eff.Index,
	})
}

// takeDecided returns the decisions made since the last call.
func (t *table) takeDecided() []Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	ds := t.decided
	t.decided = nil
	return ds
}

// record hands the decisions made so far to the Recorder. It runs on the
// loop goroutine, after the publication they caused was attempted.
func (a *Aggregator) record() {
	if a.cfg.Recorder == nil {
		return
	}
	if ds := a.t.takeDecided(); len(ds) > 0 {
		a.cfg.Recorder.Record(ds)
	}
}
