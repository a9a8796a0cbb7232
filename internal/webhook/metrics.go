package webhook

import (
	"math/rand/v2"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

func randInt64(n int64) int64 { return rand.Int64N(n) }

type metrics struct {
	delivered   prometheus.Counter
	undelivered *prometheus.CounterVec // by reason
	attempts    *prometheus.CounterVec // by result
	delay       prometheus.Histogram   // decision -> 2xx
	subs        prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg) // nil reg: counts, exports nothing
	const ns, sub = "hotspot", "webhook"
	m := &metrics{
		delivered: f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "delivered_total", Help: "Events a receiver accepted (2xx), once per subscription."}),
		undelivered: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "undelivered_total",
			Help: "Events a subscription did not get: queue_full (receiver too slow), failed (attempts exhausted or refused), removed (subscription removed or changed), shutdown."},
			[]string{"reason"}),
		attempts: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "attempts_total", Help: "POSTs to receivers, by result (ok, error)."}, []string{"result"}),
		delay: f.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name:    "delivery_seconds",
			Help:    "From the shard's decision to the receiver's 2xx, retries included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		subs: f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "subscriptions", Help: "Webhook subscriptions this process delivers to."}),
	}
	for _, r := range []string{"queue_full", "failed", "removed", "shutdown"} {
		m.undelivered.WithLabelValues(r) // exported at 0, for rate() and alerts
	}
	return m
}
