package aggregator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// The effect window: the apps report their effect every few seconds (each
// instance its own period, about 5 s), so a key's effect is summed over a
// window of effectBuckets one-second buckets, its newest the second being
// filled.
const (
	effectBuckets = 10
	effectBucket  = time.Second
)

// Outcomes of hotspot_effect_reads_total, in the order of effectCounters.
var effectOutcomes = [4]string{"l1_hit", "l2_read", "source_load", "limited"}

// effectCounters are one app's effect totals.
type effectCounters [4]prometheus.Counter

// effectRing sums one key's effect reports, cluster-wide, per second of
// receipt over the effect window.
type effectRing struct {
	b    [effectBuckets]shardapi.Effect
	last int64 // the newest bucket, in seconds since the epoch
}

// advance slides the ring so that sec is its newest bucket.
func (r *effectRing) advance(sec int64) {
	d := sec - r.last
	if d <= 0 {
		return
	}
	if d >= effectBuckets {
		r.b = [effectBuckets]shardapi.Effect{}
	} else {
		for i := r.last + 1; i <= sec; i++ {
			r.b[i%effectBuckets] = shardapi.Effect{}
		}
	}
	r.last = sec
}

// add counts a report received at now. Counts saturate.
func (r *effectRing) add(c wire.EffectCounts, now time.Time) {
	sec := now.Truncate(effectBucket).Unix()
	r.advance(sec)
	if sec <= r.last-effectBuckets {
		return // a clock that went back by a window
	}
	b := &r.b[sec%effectBuckets]
	b.L1Hits = satAdd(b.L1Hits, c.L1Hits)
	b.L2Reads = satAdd(b.L2Reads, c.L2Reads)
	b.SourceLoads = satAdd(b.SourceLoads, c.SourceLoads)
	b.Limited = satAdd(b.Limited, c.Limited)
}

// rates returns the effect per second over the window at now: what was
// reported over its buckets divided by the time they cover, 9 s and the
// part of the newest second gone by (divided by the whole 10 s, a rate read
// early in a second was up to a tenth low), and false when nothing was.
func (r *effectRing) rates(now time.Time) (shardapi.EffectRates, bool) {
	r.advance(now.Truncate(effectBucket).Unix())
	var s [4]float64
	for _, b := range r.b {
		s[0] += float64(b.L1Hits)
		s[1] += float64(b.L2Reads)
		s[2] += float64(b.SourceLoads)
		s[3] += float64(b.Limited)
	}
	if s == [4]float64{} {
		return shardapi.EffectRates{}, false
	}
	w := ((effectBuckets-1)*effectBucket + now.Sub(now.Truncate(effectBucket))).Seconds()
	return shardapi.EffectRates{L1Hits: s[0] / w, L2Reads: s[1] / w, SourceLoads: s[2] / w, Limited: s[3] / w}, true
}

// countEffect adds a report to its app's totals
// (hotspot_effect_reads_total{app, outcome}): one series per app and
// outcome, never per key, for at most MaxApps apps (a report of one more is
// left out of the totals). The caller holds t.mu.
func (t *table) countEffect(app []byte, c wire.EffectCounts) {
	ec := t.effApps[string(app)]
	if ec == nil {
		if len(t.effApps) >= t.p.maxApps {
			return
		}
		ec = new(effectCounters)
		for i, o := range effectOutcomes {
			ec[i] = t.m.effect.WithLabelValues(string(app), o)
		}
		t.effApps[string(app)] = ec
	}
	for i, n := range [4]uint64{c.L1Hits, c.L2Reads, c.SourceLoads, c.Limited} {
		if n > 0 {
			ec[i].Add(float64(n))
		}
	}
}

// maxInstances bounds the app instances a shard keeps the effect of (one
// effectRing each, about 350 bytes with its key). An instance's reports go
// to one shard (the ring's owner of its name), so S shards hold S times as
// many. Past it a new instance is left out until a silent one is pruned.
const maxInstances = 10_000

// instanceKey names one instance of an app.
type instanceKey struct{ app, src string }

// instance counts an instance's effect report, summed over its keys. The
// caller holds t.mu.
func (t *table) instance(app, src []byte, c wire.EffectCounts, now time.Time) {
	r := t.instances[instanceKey{string(app), string(src)}]
	if r == nil {
		if len(t.instances) >= maxInstances && !t.pruneInstances(now) {
			t.m.instancesDropped.Inc()
			return
		}
		r = &effectRing{}
		t.instances[instanceKey{string(app), string(src)}] = r
	}
	r.add(c, now)
}

// pruneInstances forgets the instances that reported nothing over the
// effect window, at most once a second, and says whether there is room for
// another. The caller holds t.mu.
func (t *table) pruneInstances(now time.Time) bool {
	if now.Sub(t.prunedAt) >= time.Second {
		t.prunedAt = now
		for k, r := range t.instances {
			if _, ok := r.rates(now); !ok {
				delete(t.instances, k)
			}
		}
	}
	return len(t.instances) < maxInstances
}

// instanceEffects returns the effect rates of app's instances ("": every
// app's) that reported any over the effect window at now, and forgets those
// that did not.
func (t *table) instanceEffects(app string, now time.Time) []shardapi.InstanceEffectRates {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []shardapi.InstanceEffectRates{}
	for k, r := range t.instances {
		rates, ok := r.rates(now)
		switch {
		case !ok:
			delete(t.instances, k)
		case app == "" || k.app == app:
			out = append(out, shardapi.InstanceEffectRates{App: k.app, Instance: k.src, Effect: rates})
		}
	}
	return out
}
