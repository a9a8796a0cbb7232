package loadgen

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSink records what it is given, and when.
type fakeSink struct {
	mu       sync.Mutex // guards everything below
	writes   []fakeWrite
	failRecs int64
	failEvts int64
	err      error // returned by Write
	closed   int
}

type fakeWrite struct {
	at     time.Time
	events int64
	recs   []Record
}

func (s *fakeSink) Write(_ context.Context, recs []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	w := fakeWrite{at: time.Now(), recs: append([]Record(nil), recs...)}
	for _, r := range recs {
		w.events += r.Events
	}
	s.writes = append(s.writes, w)
	return nil
}

func (s *fakeSink) Failed() (int64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failRecs, s.failEvts
}

func (s *fakeSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed++
	return nil
}

func (s *fakeSink) values() [][]byte {
	var vs [][]byte
	for _, w := range s.writes {
		for _, r := range w.recs {
			vs = append(vs, r.Value)
		}
	}
	return vs
}

// TestRunPacing runs the generator in a synctest bubble (fake clock) and
// checks that each tick is written on schedule and that the events written by
// the end of every tick are exactly floor(rate * elapsed).
func TestRunPacing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		form     Form
		rate     float64
		duration time.Duration
		every    time.Duration // interval between writes
	}{
		{"json", FormJSON, 50_000, time.Second, 10 * time.Millisecond},
		{"ndjson fraction", FormNDJSON, 333.3, 3 * time.Second, 10 * time.Millisecond},
		{"binary", FormBinary, 50_000, time.Second, 100 * time.Millisecond},
		{"binary partial flush", FormBinary, 1000, 1234 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := &fakeSink{}
				st, err := Run(t.Context(), Config{Sink: sink, Form: tc.form, Rate: tc.rate, Keys: 1000, Duration: tc.duration, Seed: 7})
				if err != nil {
					t.Fatal(err)
				}
				start := st.Truth.Start()
				if start.UnixMilli()%100 != 0 {
					t.Errorf("start %v is not on a 100 ms boundary", start)
				}
				ticks := (tc.duration + 9*time.Millisecond) / (10 * time.Millisecond)
				wantElapsed := ticks * 10 * time.Millisecond
				wantEvents := int64(math.Floor(tc.rate * float64(wantElapsed) / 1e9))
				if st.Elapsed != wantElapsed || st.Events != wantEvents || st.MaxLag != 0 {
					t.Errorf("Elapsed %v, Events %d, MaxLag %v; want %v, %d, 0", st.Elapsed, st.Events, st.MaxLag, wantElapsed, wantEvents)
				}
				var cum int64
				for i, w := range sink.writes {
					cum += w.events
					since := w.at.Sub(start)
					if since%tc.every != 0 && since != wantElapsed {
						t.Errorf("write %d at %v after the start, want a multiple of %v", i, since, tc.every)
					}
					if want := int64(math.Floor(tc.rate * float64(since) / 1e9)); cum != want {
						t.Fatalf("by %v: %d events written, want %d", since, cum, want)
					}
				}
				if cum != wantEvents {
					t.Errorf("sink got %d events, want %d", cum, wantEvents)
				}
				if sink.closed != 1 {
					t.Errorf("sink closed %d times, want 1", sink.closed)
				}
				checkAgainstTruth(t, sink.values(), st)
			})
		})
	}
}

// TestRunCancel cancels a run between ticks: the ticks generated so far,
// including a partial binary flush interval, reach the sink, and the truth
// matches them.
func TestRunCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &fakeSink{}
		ctx, cancel := context.WithCancel(t.Context())
		// The run starts 100 ms in (the bubble's clock starts on a second);
		// 357 ms is between the 25th and 26th tick.
		time.AfterFunc(357*time.Millisecond, cancel)
		st, err := Run(ctx, Config{Sink: sink, Rate: 20_000, Keys: 500, Flashes: []Flash{{Key: "hot", Rate: 5000}}, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if st.Elapsed != 250*time.Millisecond || st.Events != 25*(200+50) {
			t.Errorf("Elapsed %v, Events %d; want 250ms, %d", st.Elapsed, st.Events, 25*250)
		}
		if n := len(sink.writes); n != 3 {
			t.Errorf("%d writes, want 3 (two flushes and the partial one)", n)
		}
		checkAgainstTruth(t, sink.values(), st)
	})
}

func TestRunProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []Stats
		sink := &fakeSink{failRecs: 2, failEvts: 9}
		_, err := Run(t.Context(), Config{Sink: sink, Rate: 1000, Duration: 2 * time.Second, Progress: func(s Stats) { got = append(got, s) }})
		if err == nil {
			t.Errorf("Run with failed deliveries: no error, want one")
		}
		if len(got) != 2 {
			t.Fatalf("Progress called %d times, want 2", len(got))
		}
		for i, s := range got {
			want := time.Duration(i+1) * time.Second
			// Binary batches leave at the end of each 100 ms: all of second i.
			if s.Elapsed != want || s.Events != int64(i+1)*1000 || s.FailedRecords != 2 || s.FailedEvents != 9 || s.Truth != nil {
				t.Errorf("progress %d: %+v; want Elapsed %v, Events %d, 2 failed records, 9 failed events, no truth", i, s, want, (i+1)*1000)
			}
		}
	})
}

func TestRunSinkError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		sink := &fakeSink{err: boom}
		_, err := Run(t.Context(), Config{Sink: sink, Duration: time.Second})
		if !errors.Is(err, boom) {
			t.Errorf("Run: %v, want %v", err, boom)
		}
		if sink.closed != 1 {
			t.Errorf("sink closed %d times, want 1", sink.closed)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
	}{
		{"no brokers", Config{}},
		{"negative rate", Config{Sink: &fakeSink{}, Rate: -5}},
		{"nothing to send", Config{Sink: &fakeSink{}, Rate: NoBackground}},
		{"skew", Config{Sink: &fakeSink{}, Skew: -1}},
		{"tick", Config{Sink: &fakeSink{}, Tick: 30 * time.Millisecond}},
		{"flush", Config{Sink: &fakeSink{}, Flush: 15 * time.Millisecond}},
		{"app with apps", Config{Sink: &fakeSink{}, Apps: 2, App: "shop"}},
		{"form", Config{Sink: &fakeSink{}, Form: 9}},
		{"compression", Config{Sink: &fakeSink{}, Compression: "brotli"}},
		{"bad flash", Config{Sink: &fakeSink{}, Flashes: []Flash{{Key: "x"}}}},
		{"keys", Config{Sink: &fakeSink{}, Keys: 1 << 33}},
	} {
		if _, err := Run(context.Background(), tc.c); err == nil {
			t.Errorf("%s: Run(%+v): no error, want one", tc.name, tc.c)
		}
	}
}
