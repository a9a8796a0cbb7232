package aggregator

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
)

// Publisher stores the published hot set and the aggregator's membership.
// internal/zkpublish implements it on ZooKeeper with the layout of
// package hotset; tests fake it.
type Publisher interface {
	// Publish creates or overwrites the node of s.App written by shard
	// s.Shard, creating its parents (internal/zkpublish also writes the
	// parts of it that changed: docs/zookeeper.md, "Part nodes").
	Publish(ctx context.Context, s *hotset.Shard) error
	// Remove deletes app's node of shard; a missing node is not an error.
	Remove(ctx context.Context, app, shard string) error
	// Load returns the nodes shard wrote before, one per app.
	Load(ctx context.Context, shard string) ([]*hotset.Shard, error)
	// Collect deletes the nodes of shards that are not members and whose
	// Updated is older than olderThan, and returns how many it deleted. It may
	// leave the work to another member (self is the caller's shard id).
	Collect(ctx context.Context, self string, olderThan time.Duration) (int, error)
	// Join registers m as a member and keeps it registered, across session
	// expiry, until ctx is done; then it deregisters and returns nil. It
	// returns early only on an error it cannot recover from.
	Join(ctx context.Context, m hotset.Member) error
}

// write is one Publisher call the table has decided on.
type write struct {
	app     *appState
	shard   hotset.Shard // Keys sorted by rate, descending
	remove  bool
	pending []time.Time // crossing buckets acknowledged by this write
}

// due returns the writes to make at now: apps whose hot set changed (at
// most once per PublishInterval), nodes to renew, and nodes that have been
// empty for a TTL to remove. final writes every node that holds keys or
// changed, ignoring the intervals. Each returned write has begun: the app is
// clean until done reports a failure.
func (t *table) due(now time.Time, c *Config, final bool) []write {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ws []write
	b := t.bucket(now)
	if !final && !t.lastSweep.IsZero() && now.Sub(t.lastSweep) >= freezeGap {
		// This process was frozen and has not swept since: its decisions
		// are as old as the freeze. Renew nothing until a sweep judged them.
		return nil
	}
	for _, as := range t.apps {
		since := now.Sub(as.lastWrite)
		var remove bool
		switch {
		case !as.written && len(as.hot) == 0:
			// Nothing was ever published and nothing is hot: no node to write.
			as.dirty, as.pending = false, nil
			continue
		case final:
			if !as.dirty && len(as.hot) == 0 {
				continue
			}
		case as.dirty && now.Sub(as.lastSet) >= c.PublishInterval:
			// Only a change waits for a change: a renewal or a rate refresh
			// just before a promotion does not hold it back.
		case len(as.hot) > 0 && since >= c.Renew:
		case len(as.hot) > 0 && since >= c.RateRefresh && t.ratesMoved(as, b, now):
		case len(as.hot) == 0 && !as.dirty && since >= c.TTL:
			// Empty for a TTL: every reader has dropped its keys already.
			remove = true
		default:
			continue
		}
		w := write{app: as, remove: remove, pending: as.pending}
		if !remove {
			w.shard = hotset.Shard{App: as.name, Shard: c.ID, Updated: now.UnixMilli(), TTL: c.TTL.Milliseconds(),
				Keys: make([]hotset.Key, 0, len(as.hot))}
			for _, e := range as.hot {
				e.win.advance(b)
				e.pubRate = t.rate(e, now)
				w.shard.Keys = append(w.shard.Keys, hotset.Key{Key: e.key, Rate: e.pubRate, Since: e.since.UnixMilli(),
					Rule: &e.r.eff.Index, Kind: e.r.kind}) // e.r never changes: the node may point into it
			}
			slices.SortFunc(w.shard.Keys, func(x, y hotset.Key) int {
				return cmp.Or(cmp.Compare(y.Rate, x.Rate), cmp.Compare(x.Key, y.Key))
			})
			if len(w.shard.Keys) > c.MaxKeysPerNode {
				w.shard.Keys = w.shard.Keys[:c.MaxKeysPerNode]
			}
			as.written = true // a failed write may still have landed
		}
		if as.dirty {
			as.lastSet = now
		}
		as.dirty, as.pending, as.lastWrite = false, nil, now
		ws = append(ws, w)
	}
	return ws
}

// rateMove is the relative change of a hot key's rate that makes its node
// due for a rewrite (at most every RateRefresh): below the 3 % that
// published rates are held to (docs/aggregator.md, "Rate"), so that a rate
// written while a key's window was still filling (2900/s for a key at
// 3000/s) does not stand until the renewal, 2.5 s later.
const rateMove = hotset.RateMove

// ratesMoved reports whether a hot key of as has a rate that moved by more
// than rateMove since its node was last written. The caller holds t.mu.
func (t *table) ratesMoved(as *appState, b int64, now time.Time) bool {
	for _, e := range as.hot {
		e.win.advance(b)
		r := t.rate(e, now)
		if math.Abs(r-e.pubRate) > rateMove*e.pubRate {
			return true
		}
	}
	return false
}

// done records the outcome of w, finished at now.
func (t *table) done(w write, err error, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	as := w.app
	if err != nil {
		// Retry at the next interval; keep the crossing times for the metric.
		as.dirty = true
		as.pending = append(w.pending, as.pending...)
		return
	}
	if w.remove {
		as.written = false
		return
	}
	for _, at := range w.pending {
		t.m.detect.Observe(now.Sub(at).Seconds())
	}
}

// fit trims s to the busiest keys that encode within hotset.MaxBytes.
func fit(s *hotset.Shard) error {
	const slack = 0.95 // leaves room for rounding in the estimate below
	est := 256 + 6*(len(s.App)+len(s.Shard))
	for _, k := range s.Keys {
		est += 6*len(k.Key) + 64 // worst-case JSON escaping; numbers and field names
	}
	if est <= hotset.MaxBytes {
		return nil // fits even if every byte needed escaping: skip the trial encoding
	}
	for {
		b, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("aggregator: encode shard: %w", err)
		}
		if len(b) <= hotset.MaxBytes-64 || len(s.Keys) == 0 {
			return nil
		}
		keep := int(float64(len(s.Keys)) * slack * float64(hotset.MaxBytes) / float64(len(b)))
		s.Keys = s.Keys[:min(keep, len(s.Keys)-1)]
	}
}

// publish makes the writes due at now. It runs on the loop goroutine only, so
// writes of one app never overlap.
func (a *Aggregator) publish(ctx context.Context, now time.Time, final bool) {
	for _, w := range a.t.due(now, &a.cfg, final) {
		var err error
		op := "publish"
		if w.remove {
			op = "remove"
			err = a.call(ctx, op, func(ctx context.Context) error { return a.pub.Remove(ctx, w.app.name, a.cfg.ID) })
		} else {
			n := len(w.shard.Keys)
			if err = fit(&w.shard); err == nil {
				if len(w.shard.Keys) < n {
					a.log.Warn("hot set trimmed to fit one znode", "app", w.shard.App, "keys", n, "published", len(w.shard.Keys))
				}
				err = a.call(ctx, op, func(ctx context.Context) error { return a.pub.Publish(ctx, &w.shard) })
			}
		}
		if err != nil && ctx.Err() == nil {
			a.log.Warn("hot set write failed; retrying", "op", op, "app", w.app.name, "err", err)
		}
		a.t.done(w, err, time.Now())
	}
}

// call runs one Publisher operation under WriteTimeout and measures it.
func (a *Aggregator) call(ctx context.Context, op string, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.WriteTimeout)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	a.m.zkSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		a.m.zkErrors.WithLabelValues(op).Inc()
		return fmt.Errorf("aggregator: %s: %w", op, err)
	}
	return nil
}
