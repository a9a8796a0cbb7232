package ingest

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Dropped counts the lines that inputs dropped,
// hotspot_input_dropped_total{topic, reason}.
type Dropped struct {
	vec *prometheus.CounterVec
}

// NewDropped registers hotspot_input_dropped_total with reg (nil: not
// exported).
func NewDropped(reg prometheus.Registerer) *Dropped {
	return &Dropped{vec: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{Namespace: "hotspot", Name: "input_dropped_total",
		Help: "Lines of an --input topic that yielded no access (no match, filtered out, bad time, bad key...), by topic and reason."},
		[]string{"topic", "reason"})}
}

// Counter returns the count func of topic's input, for Input.NewDecoder:
// each call counts one dropped line under its reason. Every reason's series
// exists from the start, at 0.
func (d *Dropped) Counter(topic string) func(Reason) {
	byReason := make([]prometheus.Counter, 0, len(Reasons())+1)
	for _, r := range Reasons() {
		for len(byReason) <= int(r) {
			byReason = append(byReason, nil)
		}
		byReason[r] = d.vec.WithLabelValues(topic, r.String())
	}
	return func(r Reason) {
		if int(r) < len(byReason) && byReason[r] != nil {
			byReason[r].Inc()
		}
	}
}
