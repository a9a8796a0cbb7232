package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c_total", Help: "c"})
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "v_total", Help: "v"}, []string{"l"})
	reg.MustRegister(c, v)
	c.Add(3)
	if got := Counter(t, reg, "c_total"); got != 3 {
		t.Errorf("c_total = %v, want 3", got)
	}
	if got := Counter(t, reg, "v_total"); got != 0 {
		t.Errorf("v_total with no series = %v, want 0", got)
	}
	v.WithLabelValues("a").Inc()
	if got := Counter(t, reg, "v_total"); got != 1 {
		t.Errorf("v_total = %v, want 1", got)
	}
}
