package zkgroup

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A second Session on the same Registerer (hotcache connects again after a
// failed first attempt) shares the first one's counters instead of panicking.
func TestMetricsShareRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := newMetrics(reg), newMetrics(reg)
	a.expiries.Inc()
	b.expiries.Inc()
	b.connected.Set(1)
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		got[mf.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	for name, want := range map[string]float64{
		"hotspot_zk_session_expirations_total": 2, "hotspot_zk_connected": 1, "hotspot_zk_sessions_total": 0,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}
