package aggregator

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// batch is one partials body of count accesses of app/k from source src,
// covering [end-span, end] in event time.
func batch(src string, seq uint64, end time.Time, span time.Duration, count uint64) []byte {
	b := &wire.PartialBatch{Source: src, Seq: seq, At: end.UnixMilli(), Span: span.Milliseconds()}
	if !end.IsZero() {
		b.End = end.UnixMilli()
	}
	if count > 0 {
		b.Groups = []wire.PartialGroup{{App: "app", Entries: []wire.KeyCount{{Key: "k", Count: count}}}}
	}
	return wire.AppendPartials(nil, b)
}

// TestReplayCountedAtEventTime: a new owner of a partition reads the 6.5 s
// backlog a dead owner left in one flush. A key whose true rate never passed
// 756/s (threshold 1000/s) must not turn hot: counted at its event time,
// only the last window of the backlog is in the window. A batch without an
// event time (an old detector) still shows the old behaviour.
func TestReplayCountedAtEventTime(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	for _, tt := range []struct {
		name     string
		withEnd  bool
		wantHot  bool
		wantRate float64 // right after the replay, ±5%
	}{
		{"event time", true, false, 756},
		{"receipt time, one flush (old detector)", false, true, 4914},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, Config{}, &fakePub{})
			now := start
			// The live stream: 756/s in batches of 75.6 every 100 ms, until
			// the owner dies at +2s.
			for ; now.Before(start.Add(2 * time.Second)); now = now.Add(100 * time.Millisecond) {
				if _, err := a.apply(batch("d1", 0, now.Add(-50*time.Millisecond), 100*time.Millisecond, 76), now); err != nil {
					t.Fatal(err)
				}
				a.t.sweep(now)
			}
			// 6.5 s later the new owner replays the backlog at once.
			deadAt := now
			now = now.Add(6500 * time.Millisecond)
			a.t.sweep(now)
			// The new owner's flush: its events ended 50 ms ago and began
			// when the old owner died; an old detector said one flush.
			end, sp := time.Time{}, 100*time.Millisecond
			if tt.withEnd {
				end, sp = now.Add(-50*time.Millisecond), now.Add(-50*time.Millisecond).Sub(deadAt)
			}
			body := batch("d2", 0, end, sp, 4914)
			if _, err := a.apply(body, now); err != nil {
				t.Fatal(err)
			}
			st, _ := a.t.key("app", "k", now)
			if st.Hot != tt.wantHot || math.Abs(st.Rate-tt.wantRate) > 0.05*tt.wantRate {
				t.Errorf("after the replay: hot %v rate %.0f, want hot %v rate %.0f ±5%%", st.Hot, st.Rate, tt.wantHot, tt.wantRate)
			}
		})
	}
}

// TestDuplicateBatchAppliedOnce: a batch delivered again with the same
// (source, sequence), because the first answer came too late, is
// acknowledged and not counted twice; other sequences and sources are
// counted, and an unnumbered batch (sequence 0) is always counted.
func TestDuplicateBatchAppliedOnce(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name   string
		bodies [][]byte
		want   float64 // window total
	}{
		{"retry of one batch", [][]byte{batch("d1", 7, time.Time{}, 0, 1000), batch("d1", 7, time.Time{}, 0, 1000)}, 1000},
		{"next sequence", [][]byte{batch("d1", 7, time.Time{}, 0, 1000), batch("d1", 8, time.Time{}, 0, 1000)}, 2000},
		{"other source", [][]byte{batch("d1", 7, time.Time{}, 0, 1000), batch("d2", 7, time.Time{}, 0, 1000)}, 2000},
		{"unnumbered", [][]byte{batch("d1", 0, time.Time{}, 0, 1000), batch("d1", 0, time.Time{}, 0, 1000)}, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, Config{Threshold: 1e6}, &fakePub{})
			for _, b := range tt.bodies {
				if _, err := a.apply(b, now); err != nil {
					t.Fatal(err)
				}
			}
			st, _ := a.t.key("app", "k", now)
			if got := st.Rate * a.t.p.winSec; got != tt.want {
				t.Errorf("counted %v, want %v", got, tt.want)
			}
		})
	}
	// A bad body is not remembered: its corrected retry counts.
	a := mustNew(t, Config{Threshold: 1e6}, &fakePub{})
	good := batch("d1", 9, time.Time{}, 0, 5)
	if _, err := a.apply(good[:len(good)-1], now); err == nil {
		t.Fatal("truncated body accepted")
	}
	if _, err := a.apply(good, now); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.t.key("app", "k", now); st.Rate*a.t.p.winSec != 5 {
		t.Errorf("after a bad body and its retry: counted %v, want 5", st.Rate*a.t.p.winSec)
	}
}

// TestSteadyRateReadsTrue: a key at a steady rate, its accesses split over
// three detectors flushing every 100 ms at different phases, each batch
// reaching an event time 80 ms before its receipt. From one window after
// it starts, the rate the shard reports (at any time between batches) is
// within 3% of the true rate.
func TestSteadyRateReadsTrue(t *testing.T) {
	for _, rate := range []float64{1100, 3000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			a := mustNew(t, Config{}, &fakePub{})
			start := time.Unix(1_700_000_000, 0)
			phase := []time.Duration{0, 33 * time.Millisecond, 71 * time.Millisecond}
			sent := make([]float64, 3) // per detector: accesses handed on, fractional carry
			var worst float64
			for ms := 0; ms < 4000; ms++ {
				now := start.Add(time.Duration(ms) * time.Millisecond)
				for d, ph := range phase {
					if (time.Duration(ms)-ph)%(100*time.Millisecond/time.Millisecond) != 0 || time.Duration(ms)*time.Millisecond < ph {
						continue
					}
					end := now.Add(-80 * time.Millisecond)
					due := rate / 3 * end.Sub(start).Seconds()
					n := math.Floor(due - sent[d])
					sent[d] += n
					body := batch(fmt.Sprint("d", d), uint64(ms+1), end, 100*time.Millisecond, uint64(n))
					if _, err := a.apply(body, now); err != nil {
						t.Fatal(err)
					}
				}
				if ms%100 == 0 {
					a.t.sweep(now)
				}
				if ms >= 1500 && ms%7 == 0 {
					st, _ := a.t.key("app", "k", now)
					worst = max(worst, math.Abs(st.Rate-rate)/rate)
				}
			}
			if worst > 0.03 {
				t.Errorf("steady %v/s: worst reported rate off by %.1f%%, want <= 3%%", rate, 100*worst)
			}
		})
	}
}

// TestFrozenProcessRenewsNothingStale: a shard frozen (SIGSTOP) for 20 s
// while its hot key went cold elsewhere must not renew it on resume: before
// a sweep nothing is written, and the first sweep demotes it at once rather
// than holding it as if the detectors had stalled.
func TestFrozenProcessRenewsNothingStale(t *testing.T) {
	a := mustNew(t, Config{}, &fakePub{})
	now := time.Unix(1_700_000_000, 0)
	for range 20 {
		if _, err := a.apply(batch("d1", 0, now.Add(-50*time.Millisecond), 100*time.Millisecond, 300), now); err != nil {
			t.Fatal(err)
		}
		a.t.sweep(now)
		now = now.Add(100 * time.Millisecond)
	}
	if st, _ := a.t.key("app", "k", now); !st.Hot {
		t.Fatalf("key not hot before the freeze: %+v", st)
	}
	a.t.due(now, &a.cfg, false) // written
	now = now.Add(20 * time.Second)
	if ws := a.t.due(now, &a.cfg, false); len(ws) != 0 {
		t.Errorf("writes before the first sweep after the freeze: %+v, want none", ws)
	}
	if !a.t.sweep(now) {
		t.Error("sweep did not notice the freeze")
	}
	if st, _ := a.t.key("app", "k", now); st.Hot {
		t.Errorf("key still hot after the first sweep after the freeze: %+v", st)
	}
	ws := a.t.due(now, &a.cfg, false)
	if len(ws) != 1 || len(ws[0].shard.Keys) != 0 {
		t.Errorf("writes after the sweep: %+v, want one empty node", ws)
	}
}
