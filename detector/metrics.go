package detector

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

type metrics struct {
	records     prometheus.Counter
	entries     prometheus.Counter
	stale       prometheus.Counter
	invalid     []prometheus.Counter // by wire.Reason
	invalidVec  *prometheus.CounterVec
	filtered    prometheus.Counter
	capDropped  prometheus.Counter
	admitted    prometheus.Counter
	keys        prometheus.Gauge
	partitions  prometheus.Gauge
	late        prometheus.Gauge
	lag         *prometheus.GaugeVec
	flushSecs   prometheus.Histogram
	flushKeys   prometheus.Histogram
	sendErrs    prometheus.Counter
	commitErrs  prometheus.Counter
	fetchErrs   prometheus.Counter
	earlyRounds prometheus.Counter
	splitRounds prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg) // nil reg: counts, exports nothing
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: "hotspot", Subsystem: "detector", Name: name, Help: help}
	}
	m := &metrics{
		records: f.NewCounter(opts("records_total", "Kafka records consumed.")),
		entries: f.NewCounter(opts("entries_total", "Valid (key, count) entries counted.")),
		stale: f.NewCounter(opts("stale_entries_total",
			"Entries not counted because their event time was older than the window when read (a replayed backlog).")),
		filtered:   f.NewCounter(opts("filtered_accesses_total", "Accesses not forwarded because the key's local windowed rate was under the cutoff.")),
		capDropped: f.NewCounter(opts("cap_dropped_total", "Entries not counted because the key table was full and the sketch did not admit the key.")),
		admitted:   f.NewCounter(opts("sketch_admitted_total", "Keys admitted into the table's reserve by the count-min sketch.")),
		sendErrs:   f.NewCounter(opts("send_errors_total", "Failed Sink.Send attempts.")),
		commitErrs: f.NewCounter(opts("commit_errors_total", "Failed offset commits.")),
		fetchErrs:  f.NewCounter(opts("fetch_errors_total", "Failed fetches (other than cancellation).")),
		earlyRounds: f.NewCounter(opts("early_rounds_total",
			"Rounds ended before their flush tick because a key turned hot in them (their offsets are committed at the next tick).")),
		splitRounds: f.NewCounter(opts("split_rounds_total",
			"Rounds sent as more than one flush because their counts came from disjoint stretches of event time (a partition lagging, or reading two producers' batches).")),
		keys: f.NewGauge(prometheus.GaugeOpts{Namespace: "hotspot", Subsystem: "detector", Name: "keys",
			Help: "Keys tracked in the windowed counters, all partitions."}),
		partitions: f.NewGauge(prometheus.GaugeOpts{Namespace: "hotspot", Subsystem: "detector", Name: "partitions",
			Help: "Partitions assigned to this detector."}),
		late: f.NewGauge(prometheus.GaugeOpts{Namespace: "hotspot", Subsystem: "detector", Name: "late_partitions",
			Help: "Busy partitions whose records stopped coming, holding the detector's reach (Config.StallHold)."}),
		lag: f.NewGaugeVec(prometheus.GaugeOpts{Namespace: "hotspot", Subsystem: "detector", Name: "lag_records",
			Help: "Records between the last one counted and the partition's high-water mark."}, []string{"topic", "partition"}),
		flushSecs: f.NewHistogram(prometheus.HistogramOpts{Namespace: "hotspot", Subsystem: "detector", Name: "flush_seconds",
			Help:    "Time from the end of a flush round to the Sink accepting its counts.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		flushKeys: f.NewHistogram(prometheus.HistogramOpts{Namespace: "hotspot", Subsystem: "detector", Name: "flush_keys",
			Help:    "Keys handed to the Sink per flush.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10)}),
	}
	invalid := f.NewCounterVec(prometheus.CounterOpts{Namespace: "hotspot", Name: "events_invalid_total",
		Help: "Access records (or JSON lines) skipped because they did not decode, by reason."}, []string{"reason"})
	m.invalidVec = invalid
	rs := wire.Reasons()
	m.invalid = make([]prometheus.Counter, int(rs[len(rs)-1])+1)
	for _, r := range rs {
		m.invalid[r] = invalid.WithLabelValues(r.String())
	}
	return m
}

func (m *metrics) invalidFor(r wire.Reason) prometheus.Counter {
	if int(r) < len(m.invalid) && m.invalid[r] != nil {
		return m.invalid[r]
	}
	return m.invalidVec.WithLabelValues("unknown")
}
