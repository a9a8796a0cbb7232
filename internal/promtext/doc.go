// Package promtext reads a Prometheus text page (a process's /metrics)
// into one figure per metric name, for the tools that compare a process's
// counters before and after a run (hotspot bench, hotspot demo).
//
// Invariant: a metric's figure is the sum of its samples over every label
// set, so a counter vector gives its total; histograms and summaries are
// left out.
package promtext
