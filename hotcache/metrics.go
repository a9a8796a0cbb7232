package hotcache

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

type metrics struct {
	l1Hits        atomic.Uint64 // hot-entry accesses, added by the reporter at each flush
	l1Misses      prometheus.Counter
	promotions    prometheus.Counter
	demotions     prometheus.Counter
	refused       prometheus.Counter
	promoDelay    prometheus.Histogram
	throttled     *prometheus.CounterVec
	fallbackReads prometheus.Counter
	breakerState  prometheus.Gauge
	loads         *prometheus.CounterVec
	invalidations *prometheus.CounterVec
	reportBatches prometheus.Counter
	reportBytes   prometheus.Counter
	reportDropped *prometheus.CounterVec
	reportFailed  prometheus.Counter
	reportResent  prometheus.Counter
	effectBatches prometheus.Counter
	effectDropped prometheus.Counter
	effect        [4]prometheus.Counter // l1 hits, l2 reads, source loads, limited: every effect report's sum

	localProtected  prometheus.Counter
	fallbackAnswers prometheus.Counter
	pendingRetried  prometheus.Counter
	pendingDropped  prometheus.Counter
	trackingRefused prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{}
	f := promauto.With(reg)
	const ns, sub = "hotspot", "hotcache"
	counter := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	vec := func(name, help, label string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, []string{label})
	}
	f.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "l1_hits_total",
		Help: "Gets of hot keys (served from L1 unless counted in l1_misses_total too); updated every report interval."},
		func() float64 { return float64(m.l1Hits.Load()) })
	m.l1Misses = counter("l1_misses_total", "Gets not served from L1: keys that are not hot, or hot keys without a fresh value.")
	m.promotions = counter("promotions_total", "Keys that turned hot and entered L1.")
	m.demotions = counter("demotions_total", "Keys that stopped being hot and left L1.")
	m.refused = counter("promotions_refused_total", "Promotions refused because L1 was at its byte budget.")
	m.promoDelay = f.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "promotion_delay_seconds",
		Help:    "From the ZooKeeper event of a promotion to the value served from L1, value load time excluded.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}})
	m.throttled = vec("throttled_total", "Reads refused by a token bucket (limit=hot|loader); stale=yes when a stale L1 value was served instead.", "limit")
	for _, l := range []string{"hot", "hot_stale", "loader", "refresh"} {
		m.throttled.WithLabelValues(l) // exported at 0 from the start, so rates and alerts see the first one
	}
	m.fallbackReads = counter("fallback_reads_total", "Reads served from the last-known-value fallback while Redis failed.")
	m.breakerState = f.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "redis_breaker_state",
		Help: "Redis circuit breaker: 0 closed, 1 half-open, 2 open."})
	m.loads = vec("loads_total", "Values read from a backend (from=redis|loader) or found missing (from=notfound).", "from")
	m.invalidations = vec("invalidations_total", "Invalidations broadcast (dir=sent), received (dir=received), and keys Redis reported changed through client tracking (dir=tracked).", "dir")
	m.trackingRefused = counter("redis_tracking_refused_total", "Refusals of client tracking by Redis (before 6, or an ACL user without CLIENT or __redis__:invalidate): a hot-key read answered untracked, or the tracking connection refused its ID or subscription.")
	m.reportBatches = counter("reporter_batches_total", "Access batches handed to Kafka.")
	m.reportBytes = counter("reporter_bytes_total", "Bytes of access and effect batches handed to Kafka.")
	m.reportDropped = vec("reporter_dropped_accesses_total", "Accesses not reported (reason=full: table full; reason=kafka: the report buffer of unacknowledged batches full, or the topic's partitions not learned; reason=bad_key: a key that is not 1 to 1024 bytes of UTF-8).", "reason")
	for _, r := range []string{"full", "kafka", "bad_key"} {
		m.reportDropped.WithLabelValues(r) // exported at 0, as throttled_total
	}
	m.reportFailed = counter("reporter_failed_records_total", "Access and effect batches Kafka did not accept, after every retry (for the report buffer's retry time, 60 s by default).")
	m.reportResent = counter("reporter_resent_records_total", "Access and effect batches handed to Kafka again after the writer gave them up (a leader move or a broker's restart outlasting its attempts); each time counts.")
	m.effectBatches = counter("reporter_effect_batches_total", "Effect batches (the hot keys' L1 hits, L2 reads, source loads and limited reads) handed to Kafka.")
	m.effectDropped = counter("reporter_dropped_effects_total", "Effect entries (one per hot key and report) not reported: Kafka backlog full or down.")
	for i, e := range []struct{ name, help string }{
		{"hot_l1_hits_total", "Gets of hot keys answered from L1 without a backend read; updated every effect report."},
		{"hot_l2_reads_total", "Gets of hot keys that L1 did not answer, answered by a read that read Redis (hit, miss or error); updated every effect report."},
		{"hot_source_loads_total", "Gets of hot keys answered by a read that called the Loader; updated every effect report."},
		{"hot_limited_total", "Gets of hot keys refused by a token bucket before any backend read; updated every effect report."},
	} {
		m.effect[i] = counter(e.name, e.help)
	}
	m.localProtected = counter("local_protections_total", "Keys this instance read from its backends more than the local limit in one second and then kept locally for the local TTL.")
	m.fallbackAnswers = counter("fallback_answers_total", "Gets answered by the WithFallback function instead of ErrThrottled or ErrUnavailable.")
	m.pendingRetried = counter("invalidations_retried_total", "Invalidations that failed at first and landed on a retry.")
	m.pendingDropped = counter("invalidations_dropped_total", "Invalidations that failed and were not retried because the retry queue was full.")
	return m
}

// addEffect adds one effect report's sum over the hot keys.
func (m *metrics) addEffect(s wire.EffectCounts) {
	for i, v := range [...]uint64{s.L1Hits, s.L2Reads, s.SourceLoads, s.Limited} {
		if v > 0 {
			m.effect[i].Add(float64(v))
		}
	}
}
