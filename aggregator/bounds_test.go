package aggregator

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

func TestCountsSaturate(t *testing.T) {
	tests := []struct {
		name string
		adds []uint64
		span int64
		want uint64
	}{
		{"MaxUint64 + 2 stays MaxUint64", []uint64{math.MaxUint64, 2}, 1, math.MaxUint64},
		{"two halves and more", []uint64{math.MaxUint64/2 + 1, math.MaxUint64/2 + 1, 5}, 1, math.MaxUint64},
		{"spread over buckets", []uint64{math.MaxUint64, math.MaxUint64}, 4, math.MaxUint64},
		{"small counts add up", []uint64{3, 4}, 1, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindow(10, 100)
			for _, n := range tt.adds {
				w.addSpan(100, tt.span, n)
			}
			var total uint64
			for _, c := range w.b {
				total += c // cannot wrap: every bucket is part of sum
			}
			if w.sum != tt.want || total != tt.want {
				t.Errorf("sum = %d (buckets %d), want %d", w.sum, total, tt.want)
			}
			w.advance(100 + 10)
			if w.sum != 0 {
				t.Errorf("after sliding out, sum = %d, want 0", w.sum)
			}
		})
	}
}

func TestSaturatedKeyReadsAsHuge(t *testing.T) {
	tb, _ := testTable(t, nil)
	tb.addS("app", "k", math.MaxUint64, t0)
	tb.addS("app", "k", 2, t0)
	st, ok := tb.key("app", "k", t0)
	if !ok || st.Rate < 1e18 || !st.Hot {
		t.Errorf("after MaxUint64+2: %+v, want a hot key with a rate near 1.8e19, not a wrapped 1", st)
	}
}

func TestClampSpan(t *testing.T) {
	tests := []struct {
		ms   int64
		want time.Duration
	}{
		{-5, 0}, {0, 0}, {400, 400 * time.Millisecond},
		{math.MaxInt64, maxSpan}, {int64(maxSpan/time.Millisecond) + 1, maxSpan},
	}
	for _, tt := range tests {
		if got := clampSpan(tt.ms); got != tt.want {
			t.Errorf("clampSpan(%d) = %v, want %v", tt.ms, got, tt.want)
		}
	}
}

// A batch claiming a span that overflows nanoseconds is spread over the
// clamped span, not counted into one bucket.
func TestHugeSpanIsClamped(t *testing.T) {
	a := mustNew(t, Config{Threshold: 2000}, &fakePub{})
	body := wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", At: 1, Span: math.MaxInt64,
		Groups: []wire.PartialGroup{{App: "a", Entries: []wire.KeyCount{{Key: "k", Count: 3_600_000}}}}})
	if _, err := a.apply(body, t0); err != nil {
		t.Fatal(err)
	}
	st, _ := a.t.key("a", "k", t0)
	// 3.6e6 over an hour is 1000/s; in one bucket it would be 3.6e6/s.
	if st.Rate != 1000 || st.Hot {
		t.Errorf("rate after 3.6e6 over an overflowing span = %v (hot %v), want the hour's share, 1000", st.Rate, st.Hot)
	}
}

func TestMaxAppsRefusedBeforeAllocation(t *testing.T) {
	tb, _ := testTable(t, func(c *Config) { c.MaxApps = 3 })
	for i := range 10 {
		tb.addS(fmt.Sprintf("app%d", i), "k", 5, t0)
	}
	if got := len(tb.apps); got != 3 {
		t.Errorf("apps tracked = %d, want 3", got)
	}
	if got := len(tb.entries); got != 3 {
		t.Errorf("keys tracked = %d, want 3", got)
	}
	tb.addS("app0", "other", 5, t0) // a known app takes new keys
	if got := len(tb.apps["app0"].keys); got != 2 {
		t.Errorf("app0 keys = %d, want 2", got)
	}
}

// One big batch of distinct apps (the 8 MiB body made 699k apps)
// leaves at most MaxApps behind.
func TestManyAppsInOneBatch(t *testing.T) {
	a := mustNew(t, Config{MaxApps: 100}, &fakePub{})
	var groups []wire.PartialGroup
	for i := range 20_000 {
		groups = append(groups, wire.PartialGroup{App: fmt.Sprint("a", i), Entries: []wire.KeyCount{{Key: "k", Count: 1}}})
	}
	body := wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", At: 1, Groups: groups})
	if _, err := a.apply(body, t0); err != nil {
		t.Fatal(err)
	}
	if got := len(a.t.apps); got != 100 {
		t.Errorf("apps tracked = %d, want 100", got)
	}
}

func TestMaxHotPerAppColdestLeaves(t *testing.T) {
	tb, c := testTable(t, func(c *Config) { c.MaxHotPerApp = 3; c.Threshold = 10 })
	sum := uint64(c.Threshold * c.Window.Seconds())
	tb.addS("app", "k1", sum+1, t0)
	tb.addS("app", "k2", sum+5, t0)
	tb.addS("app", "k3", sum+3, t0)
	if got := tb.addS("app", "k4", sum+4, t0); !got {
		t.Errorf("k4 (hotter than the coldest hot key) was refused")
	}
	if got := tb.addS("app", "k5", sum, t0); got {
		t.Errorf("k5 (colder than every hot key) turned hot")
	}
	var hot []string
	for k := range tb.apps["app"].hot {
		hot = append(hot, k)
	}
	if len(hot) != 3 || tb.apps["app"].hot["k1"] != nil || tb.apps["app"].hot["k5"] != nil {
		t.Errorf("hot = %v, want k2, k3, k4 (k1 coldest left, k5 refused)", hot)
	}
	if !tb.apps["app"].dirty {
		t.Errorf("demoting k1 did not mark the app for publication")
	}
}

func TestEventTimeCountsSaturate(t *testing.T) {
	const bucket = 100 // window of 10 buckets: [9100, 10100)
	for _, tt := range []struct {
		name      string
		from, end int64
	}{
		{"spread over buckets", 9450, 10050},
		{"one instant", 9999, 9999},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindow(10, 100)
			w.addTime(100, tt.from, tt.end, bucket, math.MaxUint64)
			w.addTime(100, tt.from, tt.end, bucket, math.MaxUint64)
			w.addTime(100, tt.from, tt.end, bucket, 7)
			var total uint64
			for _, c := range w.b {
				total += c
			}
			if w.sum != math.MaxUint64 || total != math.MaxUint64 {
				t.Errorf("sum = %d (buckets %d), want MaxUint64", w.sum, total)
			}
			if w.advance(110); w.sum != 0 {
				t.Errorf("after sliding out, sum = %d, want 0", w.sum)
			}
		})
	}
}

func TestHugeSpanWithEventTimeIsClamped(t *testing.T) {
	a := mustNew(t, Config{Threshold: 2000}, &fakePub{})
	body := wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", Seq: 1, At: t0.UnixMilli(), End: t0.UnixMilli(),
		Span: math.MaxInt64, Groups: []wire.PartialGroup{{App: "a", Entries: []wire.KeyCount{{Key: "k", Count: 3_600_000}}}}})
	if _, err := a.apply(body, t0); err != nil {
		t.Fatal(err)
	}
	st, _ := a.t.key("a", "k", t0)
	if st.Rate < 900 || st.Rate > 1100 || st.Hot {
		t.Errorf("rate after 3.6e6 over an overflowing span = %v (hot %v), want about the hour's share, 1000", st.Rate, st.Hot)
	}
}

func TestSourcesBounded(t *testing.T) {
	a := mustNew(t, Config{}, &fakePub{})
	for i := range maxSources + 10 {
		body := wire.AppendPartials(nil, &wire.PartialBatch{Source: fmt.Sprint("d", i), Seq: 1, At: t0.UnixMilli(),
			Groups: []wire.PartialGroup{{App: "a", Entries: []wire.KeyCount{{Key: "k", Count: 1}}}}})
		if _, err := a.apply(body, t0); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(a.t.sources); n != maxSources {
		t.Errorf("%d sources kept, want %d", n, maxSources)
	}
	if st, _ := a.t.key("a", "k", t0); st.Rate*a.t.p.winSec != maxSources+10 {
		t.Errorf("counted %v, want every batch's count, %d", st.Rate*a.t.p.winSec, maxSources+10)
	}
}

// A saturated count that arrives with event-time weights (partials version
// 5: the detector's spread saturates at 2^64-1 too) is placed and read at
// its saturated rate, not divided or wrapped to 0, also when the detector
// goes idle after it (its next batches carry no counts, so the reach stays
// before the bucket of its last counts).
func TestSaturatedWeightedCount(t *testing.T) {
	end := t0.UnixMilli() - 20
	for _, tc := range []struct {
		name    string
		span    int64
		weights []uint64
	}{
		{"one step", 0, []uint64{math.MaxUint64}},
		{"two steps, the sum saturated", 100, []uint64{math.MaxUint64, 2}},
		{"two saturated steps", 100, []uint64{math.MaxUint64, math.MaxUint64}},
		{"small weights", 100, []uint64{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := mustNew(t, Config{Threshold: 1000}, &fakePub{})
			body := wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", At: end, End: end, Span: tc.span, Seq: 1,
				Step: 100, Weights: tc.weights,
				Groups: []wire.PartialGroup{{App: "shop", Entries: []wire.KeyCount{{Key: "trust:maxcount", Count: math.MaxUint64}}}}})
			if _, err := a.apply(body, t0); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 5; i++ {
				now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
				idle := wire.AppendPartials(nil, &wire.PartialBatch{Source: "d", At: now.UnixMilli(), Seq: uint64(1 + i)})
				if _, err := a.apply(idle, now); err != nil {
					t.Fatal(err)
				}
				a.t.sweep(now)
				st, ok := a.t.key("shop", "trust:maxcount", now)
				if !ok || !st.Hot || st.Rate < 1.8e19 {
					t.Fatalf("%v after: %+v, want a hot key at about 1.8e19/s", now.Sub(t0), st)
				}
			}
		})
	}
}
