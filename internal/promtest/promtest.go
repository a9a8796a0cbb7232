// Package promtest reads metrics out of a Prometheus registry, for tests
// that check what a package counted without reaching into its collectors.
package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Counter returns the value of the counter named name in g, of its first
// series; 0 if it has none (a vector none of whose series was touched yet).
func Counter(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
