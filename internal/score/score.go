package score

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/hotspot-dev/hotspot/internal/loadgen"
)

// Config sets the bands of the grading. A zero field means the default.
type Config struct {
	Threshold float64       // accesses per second; 0 means the Truth's
	Window    time.Duration // 0 means 1s
	High      float64       // must-report above High*Threshold; 0 means 1.2
	Low       float64       // must-not at or below Low*Threshold; 0 means 0.8
}

// Report is the grade of one run.
type Report struct {
	MustReport   int // keys whose true rate reached High*Threshold
	Reported     int // keys published hot at least once
	Found        int // must-report keys that were published
	FalseHot     int // published keys whose true rate never exceeded Low*Threshold
	Precision    float64
	Recall       float64
	Missed       []loadgen.AppKey // must-report keys never published
	False        []loadgen.AppKey // the FalseHot keys
	Delays       []time.Duration  // crossing to first publication, per found key, sorted
	P50, P95     time.Duration
	P99, Max     time.Duration
	LateOrBefore int            // found keys published before their true crossing (Delays holds 0 for them)
	Slowest      loadgen.AppKey // the found key with the longest delay (Max)
}

// Grade scores the keys first seen hot at the times in seen against truth.
func Grade(truth *loadgen.Truth, seen map[loadgen.AppKey]time.Time, cfg Config) Report {
	cfg.Threshold = cmp.Or(cfg.Threshold, truth.Threshold)
	cfg.Window = cmp.Or(cfg.Window, time.Second)
	cfg.High = cmp.Or(cfg.High, 1.2)
	cfg.Low = cmp.Or(cfg.Low, 0.8)
	maxRate := truth.MaxRate(cfg.Window)
	crossing := truth.Crossings(cfg.Threshold, cfg.Window)

	var r Report
	r.Reported = len(seen)
	for k, m := range maxRate {
		if m < cfg.High*cfg.Threshold {
			continue
		}
		r.MustReport++
		at, ok := seen[k]
		if !ok {
			r.Missed = append(r.Missed, k)
			continue
		}
		r.Found++
		d := at.Sub(crossing[k])
		if d < 0 {
			r.LateOrBefore++
			d = 0
		}
		r.Delays = append(r.Delays, d)
		if d > r.Max || (d == r.Max && r.Slowest == (loadgen.AppKey{})) {
			r.Max, r.Slowest = d, k
		}
	}
	for k := range seen {
		// A key the truth does not hold had an expected rate far below the
		// threshold (loadgen.Truth): it counts as never hot.
		if maxRate[k] <= cfg.Low*cfg.Threshold {
			r.FalseHot++
			r.False = append(r.False, k)
		}
	}
	r.Recall, r.Precision = 1, 1
	if r.MustReport > 0 {
		r.Recall = float64(r.Found) / float64(r.MustReport)
	}
	if r.Reported > 0 {
		r.Precision = float64(r.Reported-r.FalseHot) / float64(r.Reported)
	}
	slices.Sort(r.Delays)
	r.P50, r.P95, r.P99 = Percentile(r.Delays, 50), Percentile(r.Delays, 95), Percentile(r.Delays, 99)
	byKey := func(a, b loadgen.AppKey) int { return cmp.Or(cmp.Compare(a.App, b.App), cmp.Compare(a.Key, b.Key)) }
	slices.SortFunc(r.Missed, byKey)
	slices.SortFunc(r.False, byKey)
	return r
}

// Percentile returns the p-th percentile (nearest rank) of sorted durations,
// or 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// FirstCrossing returns the first of the sorted event times at which n
// events had happened within one window (that event's time), and false if
// that never happened. It turns a send log into a threshold crossing:
// n = threshold * window.
func FirstCrossing(times []time.Time, n int, window time.Duration) (time.Time, bool) {
	for i := n - 1; i < len(times) && n > 0; i++ {
		if times[i].Sub(times[i-n+1]) < window {
			return times[i], true
		}
	}
	return time.Time{}, false
}
