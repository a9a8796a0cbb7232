package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metricsOf scrapes addr's /metrics and returns each sample's value by
// metric name, summed over label sets (so a counter vector gives its total).
func metricsOf(ctx context.Context, addr string) (map[string]float64, error) {
	body, err := httpGet(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", addr, err)
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

// scrapeAll scrapes every address; the result is indexed like addrs.
func scrapeAll(ctx context.Context, addrs []string) ([]map[string]float64, error) {
	out := make([]map[string]float64, len(addrs))
	var errs []string
	for i, a := range addrs {
		m, err := metricsOf(ctx, a)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		out[i] = m
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}
