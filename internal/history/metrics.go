package history

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	written prometheus.Counter     // events stored
	dropped *prometheus.CounterVec // events lost, by reason
	seconds prometheus.Histogram   // one write round trip
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg) // nil reg: counts, exports nothing
	const ns, sub = "hotspot", "history"
	m := &metrics{
		written: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "events_written_total", Help: "Promotions and demotions appended to Redis."}),
		dropped: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "events_dropped_total",
			Help: "Promotions and demotions not stored: queue_full (Redis slower than the decisions) or redis (not stored within MaxDelay)."},
			[]string{"reason"}),
		seconds: f.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "write_seconds", Help: "Latency of one pipelined write of queued events to Redis.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}),
	}
	for _, r := range []string{"queue_full", "redis"} {
		m.dropped.WithLabelValues(r) // exported at 0, for rate() and alerts
	}
	return m
}
