package aggregator

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	batches    prometheus.Counter       // partial batches accepted
	entries    prometheus.Counter       // (app, key, count) entries accepted
	rejected   *prometheus.CounterVec   // partial batches refused, by reason
	duplicates prometheus.Counter       // partial batches acknowledged but not counted again
	hot        *prometheus.GaugeVec     // hot keys per app
	detect     prometheus.Histogram     // crossing bucket -> publication acked
	zkSeconds  *prometheus.HistogramVec // Publisher call latency, by op
	zkErrors   *prometheus.CounterVec   // Publisher call errors, by op
	tracked    prometheus.Gauge         // tracked (app, key) pairs
	evicted    *prometheus.CounterVec   // keys forgotten, by reason
	collected  prometheus.Counter       // dead shards' nodes deleted
	swept      prometheus.Gauge         // Unix time of the last sweep
	nearKeys   prometheus.Gauge         // keys with sources and effect state
	// sketchesRejected counts distinct-source sketches that could not be
	// merged (not a sketch, or another precision).
	sketchesRejected prometheus.Counter
	trackedBytes     prometheus.Gauge       // what the tracked keys cost (keyBytes)
	effect           *prometheus.CounterVec // the apps' reads of hot keys, by app and outcome
	instancesDropped prometheus.Counter     // instance reports left out: maxInstances held
	unsure           prometheus.Counter     // times the reach fell more than a window behind (table.unsure)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg) // nil reg: counts, exports nothing
	const ns, sub = "hotspot", "aggregator"
	m := &metrics{
		unsure: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "reach_behind_total",
			Help: "Times the detectors' reach fell more than a window behind the clock: rates were unsure (hot keys neither demoted nor read lower) until it caught up."}),
		batches: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "partial_batches_total", Help: "Partial-count batches accepted from detectors."}),
		entries: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "partial_entries_total", Help: "(app, key, count) entries accepted from detectors."}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "partial_batches_rejected_total", Help: "Partial-count batches refused, by reason (bad_body, too_large, content_type)."},
			[]string{"reason"}),
		duplicates: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "partial_batches_duplicate_total", Help: "Partial-count batches received again (same source and sequence): acknowledged, not counted twice."}),
		hot: f.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "hot_keys", Help: "Keys this shard holds hot, per app."}, []string{"app"}),
		detect: f.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name:    "detection_latency_seconds",
			Help:    "From the start of the bucket in which a key's window crossed the threshold to ZooKeeper acknowledging its publication.",
			Buckets: []float64{.025, .05, .1, .15, .2, .3, .5, .75, 1, 2, 5}}),
		zkSeconds: f.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "zk_op_seconds", Help: "Latency of ZooKeeper operations (publish, remove, load, collect).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}, []string{"op"}),
		zkErrors: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "zk_errors_total", Help: "Failed ZooKeeper operations, by op."}, []string{"op"}),
		tracked: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "keys_tracked", Help: "(app, key) pairs with a window at this shard."}),
		trackedBytes: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "tracked_bytes",
			Help: "Heap the tracked (app, key) pairs take (entry, window ring, key, index slots; not sources and effect), as the shard accounts it against MaxBytes (hotspotd --aggregator-max-mib)."}),
		evicted: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "keys_evicted_total",
			Help: "Keys forgotten: idle (empty window, not hot), cap (coldest evicted at MaxKeys), cap_bytes (coldest evicted at MaxBytes), refused (newcomer colder than every sampled key), refused_app (MaxApps apps tracked), hot_cap (coldest hot key demoted at MaxHotPerApp), hot_cap_refused (promotion refused at MaxHotPerApp)."},
			[]string{"reason"}),
		collected: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "gc_nodes_deleted_total", Help: "Shard nodes of departed aggregators deleted after 2*TTL."}),
		swept: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "last_sweep_timestamp_seconds",
			Help: "Unix time at which the shard's loop last swept its windows and published what was due; it advances every bucket while the shard is alive."}),
		nearKeys: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "near_keys", Help: "Keys near their threshold or hot for which the shard keeps sources and effect (at most MaxNearKeys)."}),
		sketchesRejected: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "sketches_rejected_total", Help: "Sketches of a key's distinct sources that could not be merged: not a HyperLogLog, or not of precision 12."}),
		effect: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "effect",
			Name: "reads_total",
			Help: "Reads of hot keys the apps reported, by app and outcome: l1_hit (answered from the L1), l2_read (went to Redis), source_load (loaded from the source), limited (refused by the rate limit). Each shard counts the keys it owns: sum over shards."},
			[]string{"app", "outcome"}),
		instancesDropped: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "instance_reports_dropped_total",
			Help: "Effect reports of an app instance left out of the per-instance view (/v1/instances): the shard held 10,000 instances that all reported within 10 s."}),
	}
	for _, op := range []string{"publish", "remove", "load", "collect"} {
		m.zkErrors.WithLabelValues(op) // exported at 0 from the start, so rates and alerts see the first one
	}
	return m
}
