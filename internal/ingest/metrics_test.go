package ingest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestDropped: each reason of a topic counts in its own series, and every
// reason's series is there from the start.
func TestDropped(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := NewDropped(reg)
	count := d.Counter("web")
	rs := Reasons()
	count(rs[0])
	count(rs[0])
	count(Reason(250)) // unknown: ignored
	if got := testutil.ToFloat64(d.vec.WithLabelValues("web", rs[0].String())); got != 2 {
		t.Errorf("%s = %v, want 2", rs[0], got)
	}
	if n := testutil.CollectAndCount(reg, "hotspot_input_dropped_total"); n != len(rs) {
		t.Errorf("%d series, want one per reason (%d)", n, len(rs))
	}
}
