package score

import (
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/loadgen"
)

// truth builds a Truth of 30 slots (3 s) with each key at a constant
// rate from slot `from` on.
func truth(rates map[string]float64, from int) *loadgen.Truth {
	t := &loadgen.Truth{Version: loadgen.TruthVersion, StartMs: 1_000_000, SlotMs: 100, Slots: 30, Threshold: 1000}
	for k, r := range rates {
		counts := make([]uint64, 30)
		for i := from; i < 30; i++ {
			counts[i] = uint64(r / 10)
		}
		t.Keys = append(t.Keys, loadgen.TruthKey{App: "a", Key: k, Counts: counts})
	}
	return t
}

func TestGrade(t *testing.T) {
	tr := truth(map[string]float64{"x10": 10000, "x2": 2000, "x1.2": 1200, "x1": 1000, "x0.8": 800, "x0.5": 500}, 5)
	start := time.UnixMilli(tr.StartMs)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	seen := map[loadgen.AppKey]time.Time{
		{App: "a", Key: "x10"}:   at(700),  // crosses at 600 (slot 5 alone holds 1000)
		{App: "a", Key: "x2"}:    at(1200), // crosses at 1000 (5 slots of 200)
		{App: "a", Key: "x1"}:    at(2000), // grey zone: neither found nor false
		{App: "a", Key: "x0.5"}:  at(2000), // false
		{App: "a", Key: "ghost"}: at(2000), // not in the truth: false
	}
	r := Grade(tr, seen, Config{})
	if r.MustReport != 3 || r.Found != 2 || r.Reported != 5 || r.FalseHot != 2 {
		t.Fatalf("must %d found %d reported %d false %d; want 3 2 5 2", r.MustReport, r.Found, r.Reported, r.FalseHot)
	}
	if len(r.Missed) != 1 || r.Missed[0].Key != "x1.2" {
		t.Errorf("missed %v, want [x1.2]", r.Missed)
	}
	if got, want := r.Recall, 2.0/3; got != want {
		t.Errorf("recall %v, want %v", got, want)
	}
	if got, want := r.Precision, 3.0/5; got != want {
		t.Errorf("precision %v, want %v", got, want)
	}
	if len(r.Delays) != 2 || r.Delays[0] != 100*time.Millisecond || r.Delays[1] != 200*time.Millisecond {
		t.Errorf("delays %v, want [100ms 200ms]", r.Delays)
	}
	if r.Max != 200*time.Millisecond || r.Slowest.Key != "x2" {
		t.Errorf("slowest %v at %v, want a/x2 at 200ms", r.Slowest, r.Max)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {95, 10}, {99, 10}, {10, 1}, {0, 1}} {
		if got := Percentile(ds, tt.p); got != tt.want {
			t.Errorf("Percentile(%v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("Percentile of nothing is not 0")
	}
}

func TestFirstCrossing(t *testing.T) {
	base := time.UnixMilli(0)
	at := func(ms ...int) []time.Time {
		var ts []time.Time
		for _, m := range ms {
			ts = append(ts, base.Add(time.Duration(m)*time.Millisecond))
		}
		return ts
	}
	tests := []struct {
		times []time.Time
		n     int
		want  int // ms, -1 for never
	}{
		{at(0, 500, 999), 3, 999},
		{at(0, 500, 1000, 1400), 3, 1400}, // 0..1000 is not within one second
		{at(0, 600, 1200, 1800), 3, -1},
		{at(0), 2, -1},
		{nil, 1, -1},
	}
	for _, tt := range tests {
		got, ok := FirstCrossing(tt.times, tt.n, time.Second)
		if (tt.want < 0) != !ok || (ok && got.Sub(base) != time.Duration(tt.want)*time.Millisecond) {
			t.Errorf("FirstCrossing(%v, %d) = %v, %v; want %dms", tt.times, tt.n, got.Sub(base), ok, tt.want)
		}
	}
}
