package promtext

import (
	"bytes"
	"fmt"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sum returns each counter's, gauge's and untyped metric's value by name,
// summed over its label sets.
func Sum(page []byte) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return nil, fmt.Errorf("promtext: %w", err)
	}
	out := make(map[string]float64, len(families))
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.Counter != nil:
				out[name] += m.Counter.GetValue()
			case m.Gauge != nil:
				out[name] += m.Gauge.GetValue()
			case m.Untyped != nil:
				out[name] += m.Untyped.GetValue()
			}
		}
	}
	return out, nil
}
