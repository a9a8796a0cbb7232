package detector

import (
	"context"
	"errors"
	"fmt"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// startFake runs a detector on a fake source inside the current synctest
// bubble. It returns the detector and a stop function that cancels Run and
// returns its error.
func startFake(t *testing.T, cfg Config, src *fakeSource, sink Sink) (*Detector, func() error) {
	t.Helper()
	cfg.Source = src
	cfg.MaxKeyLen = testMaxKeyLen
	cfg.Registerer = prometheus.NewRegistry()
	d, err := New(cfg, sink)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	return d, func() error {
		cancel()
		return <-done
	}
}

func TestRunCountsFlushesAndCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(3)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		c := newCorpus(t, 3, 60, 1)
		src.assign(0, 1, 2)
		d, stop := startFake(t, Config{Alpha: -1}, src, sink)
		for p, recs := range c.records {
			topic.append(p, recs...)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if diff := diffSums(sink.got(), c.want); diff != "" {
			t.Fatalf("delivered counts differ: %s", diff)
		}
		checkInvalid(t, d, c.invalid)
		if got, want := topic.commits(), map[int]int64{0: 60, 1: 60, 2: 60}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("committed %v, want %v", got, want)
		}
		if got := testutil.ToFloat64(d.m.records); got != 180 {
			t.Errorf("records_total = %v, want 180", got)
		}
		if got := testutil.ToFloat64(d.m.entries); got != float64(c.entries) {
			t.Errorf("entries_total = %v, want %d", got, c.entries)
		}
		if got := testutil.ToFloat64(d.m.partitions); got != 3 {
			t.Errorf("partitions = %v, want 3", got)
		}
		if got := testutil.ToFloat64(d.m.lag.WithLabelValues(fakeTopicName, "1")); got != 0 {
			t.Errorf("lag of partition 1 = %v, want 0", got)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		// Every commit follows a successful send; the group is left last.
		ev := topic.eventLog()
		if ev[len(ev)-1] != "close" {
			t.Fatalf("events %v: want close last", ev)
		}
		if i := slices.IndexFunc(ev, func(s string) bool { return strings.HasPrefix(s, "commit") }); i < 1 || ev[i-1] != "send" {
			t.Fatalf("events %v: want the first commit right after a send", ev)
		}
	})
}

// Offsets are committed once per CommitInterval, not once per round, and
// the generation's last round is committed whatever the interval. By
// default they are committed every round when a record read again after a
// crash would still be young enough to count (MaxAge).
func TestCommitsOncePerInterval(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		lo, hi int // commits while 30 records arrive over 3 s, the final one included
	}{
		{"default", Config{}, 3, 5}, // 1 s
		{"every round", Config{CommitInterval: 100 * time.Millisecond}, 15, 31},
		{"MaxAge beyond the takeover", Config{MaxAge: 9 * time.Second}, 15, 31},
		{"takeover within MaxAge", Config{Takeover: 500 * time.Millisecond}, 15, 31},
		{"every entry counts", Config{MaxAge: -1}, 15, 31},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				topic := newFakeTopic(1)
				src := newFakeSource(topic)
				sink := newFakeSink(topic)
				c := newCorpus(t, 1, 30, 3)
				src.assign(0)
				cfg := tc.cfg
				cfg.Alpha = -1
				_, stop := startFake(t, cfg, src, sink)
				for _, rec := range c.records[0] {
					topic.append(0, rec)
					time.Sleep(100 * time.Millisecond)
				}
				if err := stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}
				n := 0
				for _, ev := range topic.eventLog() {
					if strings.HasPrefix(ev, "commit") {
						n++
					}
				}
				if n < tc.lo || n > tc.hi {
					t.Errorf("%d commits, want %d to %d", n, tc.lo, tc.hi)
				}
				if got, want := topic.commits(), map[int]int64{0: 30}; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("committed %v at the end, want %v", got, want)
				}
				if diff := diffSums(sink.got(), c.want); diff != "" {
					t.Errorf("delivered counts differ: %s", diff)
				}
			})
		})
	}
}

// When a generation ends with a round's counts refused, the rounds the Sink
// took before it are committed, though CommitInterval has not passed: the
// next owner reads on at once, and would count them again.
func TestGenerationEndCommitsTakenRounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(1)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		var down atomic.Bool
		sink.fail = func(int) error {
			if down.Load() {
				return errors.New("aggregator unavailable")
			}
			return nil
		}
		g := src.assign(0)
		_, stop := startFake(t, Config{Alpha: -1}, src, sink)
		for i := range 3 {
			topic.append(0, []byte(fmt.Sprintf(`{"key":"k%d"}`, i)))
			time.Sleep(300 * time.Millisecond)
		}
		if got, want := topic.commits(), map[int]int64{0: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("committed %v within the interval, want %v (the first round only)", got, want)
		}
		down.Store(true)
		topic.append(0, []byte(`{"key":"lost"}`))
		time.Sleep(300 * time.Millisecond)
		g.end()
		synctest.Wait()
		if got, want := topic.commits(), map[int]int64{0: 3}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("committed %v after the generation ended, want %v (the rounds taken, not the refused one)", got, want)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// A generation whose commits were refused (its coordinator went away with a
// broker) hands its partitions back to the same member in the next one: the
// member reads on from where its counts were handed on, not from the
// group's older commit, and counts no record twice.
func TestLostCommitCountsNothingTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(1)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		src.assign(0)
		_, stop := startFake(t, Config{Alpha: -1}, src, sink)
		want := map[string]uint64{}
		appendKey := func(k string) {
			topic.append(0, []byte(`{"key":"`+k+`"}`))
			want["default/"+k]++
			time.Sleep(300 * time.Millisecond)
		}
		appendKey("a")
		if got := topic.commits(); got[0] != 1 {
			t.Fatalf("committed %v, want partition 0 at 1", got)
		}
		topic.mu.Lock()
		topic.commitErr = errors.New("not the coordinator")
		topic.mu.Unlock()
		for range 5 {
			appendKey("b") // counted and handed on, never committed
		}
		src.assign(0) // ends the first generation, whose last commit fails too
		time.Sleep(300 * time.Millisecond)
		topic.mu.Lock()
		topic.commitErr = nil
		topic.mu.Unlock()
		appendKey("c")
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if diff := diffSums(sink.got(), want); diff != "" {
			t.Errorf("counts after a generation with refused commits: %s", diff)
		}
		if got := topic.commits(); got[0] != 7 {
			t.Errorf("committed %v at the end, want partition 0 at 7", got)
		}
	})
}

// TestRewoundPartitionCommitsTheNewLog: a partition whose log was replaced
// (its topic deleted and created again) is counted from the new log's start;
// the new log's offsets are committed though lower than the old one's, and
// the next generation starts from them, not from the old log's offset this
// member handed on (which would count the new log twice).
func TestRewoundPartitionCommitsTheNewLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(1)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		src.assign(0)
		_, stop := startFake(t, Config{Alpha: -1}, src, sink)
		want := map[string]uint64{}
		for range 5 {
			topic.append(0, []byte(`{"key":"old"}`))
			want["default/old"]++
		}
		time.Sleep(2 * time.Second)
		if got := topic.commits(); got[0] != 5 {
			t.Fatalf("committed %v, want partition 0 at 5", got)
		}
		src.assign(0) // the first generation hands on 5
		time.Sleep(300 * time.Millisecond)
		topic.replace(0, []byte(`{"key":"new"}`), []byte(`{"key":"new"}`))
		want["default/new"] += 2
		time.Sleep(2 * time.Second)
		if got := topic.commits(); got[0] != 2 {
			t.Fatalf("committed %v after the log was replaced, want partition 0 at 2, the new log's", got)
		}
		src.assign(0)
		time.Sleep(300 * time.Millisecond)
		topic.append(0, []byte(`{"key":"c"}`))
		want["default/c"]++
		time.Sleep(2 * time.Second)
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if diff := diffSums(sink.got(), want); diff != "" {
			t.Errorf("counts: %s; events %v", diff, topic.eventLog())
		}
		if got := topic.commits(); got[0] != 3 {
			t.Errorf("committed %v at the end, want partition 0 at 3", got)
		}
	})
}

func TestRunCancelFlushesCountsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(2)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		c := newCorpus(t, 2, 40, 2)
		src.assign(0, 1)
		// A flush tick that never comes, and a threshold no key reaches (so
		// none ends a round early): everything is in flight at cancel.
		d, stop := startFake(t, Config{Alpha: -1, Flush: time.Hour, Threshold: 1e9}, src, sink)
		for p, recs := range c.records {
			topic.append(p, recs...)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := testutil.ToFloat64(d.m.records); got != 80 {
			t.Fatalf("records_total = %v before cancel, want 80", got)
		}
		if n := len(sink.callLog()); n != 0 {
			t.Fatalf("%d sends before cancel, want 0", n)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run after cancel: %v, want nil", err)
		}
		if diff := diffSums(sink.got(), c.want); diff != "" {
			t.Fatalf("counts in flight at cancel: %s", diff)
		}
		if got, want := topic.eventLog(), []string{"send", "commit 0=40 1=40", "close"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
	})
}

func TestRunRetriesTheSameCountsBeforeCommitting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(1)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		sink.fail = func(call int) error {
			if call <= 3 {
				return errors.New("aggregator unavailable")
			}
			return nil
		}
		src.assign(0)
		d, stop := startFake(t, Config{Alpha: -1}, src, sink)
		topic.append(0, []byte(`{"key":"a","count":5}`), []byte(`{"key":"b"}`))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		calls := sink.callLog()
		if len(calls) != 4 {
			t.Fatalf("%d sends, want 4 (3 failures, 1 success)", len(calls))
		}
		for i := 1; i < 4; i++ {
			if fmt.Sprint(calls[i]) != fmt.Sprint(calls[0]) {
				t.Fatalf("send %d carried %v, want the same counts as the first, %v", i+1, calls[i], calls[0])
			}
		}
		if got, want := topic.eventLog(), []string{"send-failed", "send-failed", "send-failed", "send", "commit 0=2"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		if got := testutil.ToFloat64(d.m.sendErrs); got != 3 {
			t.Errorf("send_errors_total = %v, want 3", got)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// TestSinkDownMakesUnhealthyNotExit: a Sink that fails for longer than
// SendTimeout makes the detector unhealthy; Run keeps retrying the same
// round (same Seq) and heals when the Sink is back, committing once.
func TestSinkDownMakesUnhealthyNotExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(2)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		var down atomic.Bool
		down.Store(true)
		sink.fail = func(int) error {
			if down.Load() {
				return errors.New("aggregator down")
			}
			return nil
		}
		src.assign(0, 1)
		d, stop := startFake(t, Config{Alpha: -1, SendTimeout: 3 * time.Second}, src, sink)
		topic.append(0, []byte(`{"key":"a"}`))
		topic.append(1, []byte(`{"key":"b"}`))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if err := d.Healthy(); err != nil {
			t.Fatalf("Healthy after 2s of failures = %v, want nil (SendTimeout is 3s)", err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if err := d.Healthy(); err == nil {
			t.Fatalf("Healthy after 4s of failures = nil, want an error")
		}
		if got := topic.commits(); len(got) != 0 {
			t.Fatalf("committed %v while the sink refused, want nothing", got)
		}
		down.Store(false)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if err := d.Healthy(); err != nil {
			t.Errorf("Healthy after the sink is back = %v, want nil", err)
		}
		if got, want := sink.got(), map[string]uint64{"default/a": 1, "default/b": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("counts taken: got %v, want %v", got, want)
		}
		sink.mu.Lock()
		fl := slices.Clone(sink.flushes)
		sink.mu.Unlock()
		for i, f := range fl {
			if f.Seq != fl[0].Seq {
				t.Fatalf("retry %d carried Seq %d, want the first attempt's %d", i, f.Seq, fl[0].Seq)
			}
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// TestShutdownWithSinkDownCommitsNothing: at shutdown, counts the Sink
// refuses are retried for SendTimeout; then Run returns the error, having
// committed nothing past them, and leaves the group.
func TestShutdownWithSinkDownCommitsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(2)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		errDown := errors.New("aggregator down")
		sink.fail = func(int) error { return errDown }
		src.assign(0, 1)
		_, stop := startFake(t, Config{Alpha: -1, SendTimeout: 3 * time.Second}, src, sink)
		topic.append(0, []byte(`{"key":"a"}`))
		topic.append(1, []byte(`{"key":"b"}`))
		time.Sleep(time.Second)
		start := time.Now()
		err := stop()
		if !errors.Is(err, errDown) {
			t.Fatalf("Run: %v, want an error wrapping %v", err, errDown)
		}
		if took := time.Since(start); took < 3*time.Second || took > 6*time.Second {
			t.Errorf("Run gave up %v after the cancel, want about SendTimeout (3s)", took)
		}
		if got := topic.commits(); len(got) != 0 {
			t.Fatalf("committed %v after the sink never accepted, want nothing", got)
		}
		if ev := topic.eventLog(); ev[len(ev)-1] != "close" {
			t.Fatalf("events %v: want the group left", ev)
		}
	})
}

// firstFlushes runs a detector without filter on src for 150 ms of the
// bubble's clock and returns the Flush of each send with counts (at least
// one).
func firstFlushes(t *testing.T, src *fakeSource, sink *fakeSink) []Flush {
	t.Helper()
	_, stop := startFake(t, Config{Alpha: -1}, src, sink)
	defer stop()
	time.Sleep(150 * time.Millisecond)
	synctest.Wait()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.flushes) == 0 {
		t.Fatal("no send with counts")
	}
	return slices.Clone(sink.flushes)
}

// placed returns the accesses the flushes fls place per step of event time
// (Unix ms of its start), as an aggregator reads their weights: from the
// step of End-Span on.
func placed(fls []Flush) map[int64]uint64 {
	out := map[int64]uint64{}
	for _, fl := range fls {
		step := fl.Step.Milliseconds()
		start := fl.End.Add(-fl.Span).UnixMilli() / step * step
		for i, w := range fl.Weights {
			if w > 0 {
				out[start+int64(i)*step] += w
			}
		}
	}
	return out
}

// byRound returns the flushes fls grouped by round (the same At), in order,
// and checks that each round sends its flushes oldest first.
func byRound(t *testing.T, fls []Flush) [][]Flush {
	t.Helper()
	var out [][]Flush
	for i, fl := range fls {
		if i == 0 || !fl.At.Equal(fls[i-1].At) {
			out = append(out, nil)
		} else if prev := fls[i-1]; !prev.End.Before(fl.End) {
			t.Errorf("round at %v: a flush ending %v after one ending %v, want the oldest first", fl.At, fl.End, prev.End)
		}
		out[len(out)-1] = append(out[len(out)-1], fl)
	}
	return out
}

// TestFirstRoundSpansTheBacklog: a generation that starts on a backlog (the
// partitions of a dead owner) counts only what is younger than MaxAge (twice
// the window: what an aggregator's window may still cover), and hands the
// Sink the event time that covers, ending at its newest event, not one
// flush: the aggregator counts each access where it happened.
func TestFirstRoundSpansTheBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(2)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		now := time.Now()
		for i := range 65 { // 6.5 s of backlog, 100 ms apart, on both partitions
			ts := now.Add(time.Duration(i-65) * 100 * time.Millisecond).UnixMilli()
			topic.append(i%2, wire.AppendJSON(nil, wire.Event{Key: "k", TS: ts}))
		}
		src.assign(0, 1)
		fl := byRound(t, firstFlushes(t, src, sink))[0]
		if got, want := fl[len(fl)-1].End, now.Add(-100*time.Millisecond); !got.Equal(want) {
			t.Errorf("first round ends at %v, want %v", got, want)
		}
		want := map[int64]uint64{}
		for i := 45; i < 65; i++ { // the last 2 s (MaxAge)
			want[now.Add(time.Duration(i-65)*100*time.Millisecond).UnixMilli()] = 1
		}
		if got := placed(fl); !maps.Equal(got, want) {
			t.Errorf("first round places %v, want %v", got, want)
		}
		if got := sink.got()["default/k"]; got != 20 {
			t.Errorf("counted %d accesses of the backlog, want the 20 of the last two windows", got)
		}
	})
}

// TestRoundWeightsFollowEventTime: a round tells the Sink how its accesses
// lie in its event time, per Bucket, so that a backlog's records far apart
// are placed where they happened, not spread over the stretch between them.
func TestRoundWeightsFollowEventTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(2)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		now := time.Now() // synctest's clock: a whole second
		at := func(ms int) int64 { return now.Add(time.Duration(ms) * time.Millisecond).UnixMilli() }
		topic.append(0, wire.AppendJSON(nil, wire.Event{Key: "k", TS: at(-900)}))
		topic.append(1, wire.AppendJSON(nil, wire.Event{Key: "k", TS: at(-850)}))
		topic.append(0, wire.AppendJSON(nil, wire.Event{Key: "k", TS: at(-100)}))
		topic.append(0, wire.AppendJSON(nil, wire.Event{Key: "k", TS: at(-60)}))
		src.assign(0, 1)
		fl := byRound(t, firstFlushes(t, src, sink))[0]
		want := map[int64]uint64{at(-900): 2, at(-100): 2}
		if got := placed(fl); !maps.Equal(got, want) || fl[len(fl)-1].End.UnixMilli() != at(-60) {
			t.Errorf("first round places %v ending %v, want %v ending %d", got, fl[len(fl)-1].End.UnixMilli(), want, at(-60))
		}
	})
}

func TestRebalanceFlushesAndCommitsTheEndingGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(2)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		g1 := src.assign(0, 1)
		// Flush never ticks: only generation ends and cancel flush.
		d, stop := startFake(t, Config{Alpha: -1, Flush: time.Hour}, src, sink)
		topic.append(0, []byte(`{"key":"a"}`), []byte(`{"key":"a"}`))
		topic.append(1, []byte(`{"key":"b","count":4}`))
		time.Sleep(time.Second)
		synctest.Wait()

		g1.end() // a rebalance: partition 1 goes elsewhere
		if got, want := sink.got(), map[string]uint64{"default/a": 2, "default/b": 4}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after the generation ended: got %v, want %v", got, want)
		}
		if got, want := topic.commits(), map[int]int64{0: 2, 1: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after the generation ended: committed %v, want %v", got, want)
		}

		src.assign(0)
		topic.append(0, []byte(`{"key":"a","count":10}`))
		topic.append(1, []byte(`{"key":"b","count":100}`)) // not ours any more
		time.Sleep(time.Second)
		synctest.Wait()
		if got := testutil.ToFloat64(d.m.partitions); got != 1 {
			t.Errorf("partitions = %v, want 1", got)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got, want := sink.got(), map[string]uint64{"default/a": 12, "default/b": 4}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("at the end: got %v, want %v", got, want)
		}
		if got, want := topic.commits(), map[int]int64{0: 3, 1: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("at the end: committed %v, want %v", got, want)
		}
	})
}

func TestRunFilterUsesDetectorsAndPartitions(t *testing.T) {
	tests := []struct {
		name      string
		detectors int
		want      map[string]uint64
		filtered  float64
	}{
		// Alpha 0.05, Threshold 1000, Window 1s, P 2: cutoff 25/D.
		{"one detector: cutoff 25", 1, map[string]uint64{"default/hot": 30}, 20 + 10},
		// The filter is per partition: cold has 4 on partition 0 (dropped)
		// and 6 on partition 1 (forwarded).
		{"five detectors: cutoff 5", 5, map[string]uint64{"default/cold": 6, "default/hot": 30, "default/warm": 20}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				topic := newFakeTopic(2)
				src := newFakeSource(topic)
				sink := newFakeSink(topic)
				src.assign(0, 1)
				cfg := Config{Detectors: func() int { return tc.detectors }}
				d, stop := startFake(t, cfg, src, sink)
				time.Sleep(10 * time.Millisecond)
				topic.append(0, []byte(`{"key":"hot","count":30}`), []byte(`{"key":"warm","count":20}`),
					[]byte(`{"key":"cold","count":4}`))
				topic.append(1, []byte(`{"key":"cold","count":6}`))
				time.Sleep(3 * time.Second)
				synctest.Wait()
				if got := sink.got(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("forwarded %v, want %v", got, tc.want)
				}
				if got := testutil.ToFloat64(d.m.filtered); got != tc.filtered {
					t.Fatalf("filtered_accesses_total = %v, want %v", got, tc.filtered)
				}
				if got := testutil.ToFloat64(d.m.keys); got != 0 {
					t.Errorf("keys = %v after the window passed, want 0", got)
				}
				if err := stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}
			})
		})
	}
}

func TestRunSurvivesCommitFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(1)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		topic.commitErr = errors.New("coordinator moved")
		src.assign(0)
		d, stop := startFake(t, Config{Alpha: -1}, src, sink)
		topic.append(0, []byte(`{"key":"a"}`))
		time.Sleep(time.Second)
		synctest.Wait()
		if got := testutil.ToFloat64(d.m.commitErrs); got < 1 {
			t.Fatalf("commit_errors_total = %v, want >= 1", got)
		}
		topic.mu.Lock()
		topic.commitErr = nil
		topic.mu.Unlock()
		topic.append(0, []byte(`{"key":"a"}`))
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := topic.commits(), map[int]int64{0: 2}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("committed %v, want %v", got, want)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := sink.got(); got["default/a"] != 2 {
			t.Fatalf("delivered %v, want default/a: 2", got)
		}
	})
}

func TestRunSendsEmptyRoundsWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(1)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		src.assign(0)
		_, stop := startFake(t, Config{}, src, sink)
		time.Sleep(time.Second + 50*time.Millisecond)
		synctest.Wait()
		sink.mu.Lock()
		empty := sink.empty
		sink.mu.Unlock()
		if empty != 10 {
			t.Fatalf("%d empty sends in 1s of 100ms rounds, want 10", empty)
		}
		if got := topic.commits(); len(got) != 0 {
			t.Fatalf("committed %v with no record read, want nothing", got)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

func TestNewChecksConfig(t *testing.T) {
	sink := newFakeSink(newFakeTopic(1))
	src := newFakeSource(newFakeTopic(1))
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults with a source", Config{Source: src}, true},
		{"no source", Config{}, false},
		{"bucket does not divide window", Config{Source: src, Bucket: 300 * time.Millisecond}, false},
		{"negative flush", Config{Source: src, Flush: -1}, false},
		{"negative takeover", Config{Source: src, Takeover: -time.Second}, false},
		{"key bytes below key length", Config{Source: src, MaxKeyBytes: 10}, false},
		{"input topic read twice", Config{Source: src, Inputs: []Input{{Topic: "a"}, {Topic: "a"}}}, false},
	}
	for _, tc := range tests {
		_, err := New(tc.cfg, sink)
		if (err == nil) != tc.ok {
			t.Errorf("%s: New error %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if _, err := New(Config{Source: src}, nil); err == nil {
		t.Errorf("nil sink: New succeeded, want an error")
	}
}

// TestSpanFollowsEventTime: the span handed to the Sink is the event time
// the round's entries cover, from their oldest to their newest: none for a
// round of one instant (it is never stretched back to the previous round,
// which would smear a sparse partition's counts over buckets already
// evaluated), a flush interval when a partition read a record at each end
// of it, and the whole stretch when the detector catches up on a backlog.
func TestSpanFollowsEventTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(2)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		src.assign(0, 1)
		_, stop := startFake(t, Config{Alpha: -1}, src, sink)
		defer stop()
		rec := func(key string, ago time.Duration) []byte {
			return wire.AppendJSON(nil, wire.Event{Key: key, TS: time.Now().Add(-ago).UnixMilli()})
		}
		round := func() {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		// Live: partition 0 every round; partition 1 every third, with
		// an entry 100 ms before and one now. Records come at ticks, on
		// step boundaries.
		ms := func(ago time.Duration) int64 { return time.Now().Add(-ago).UnixMilli() }
		var want []map[int64]uint64
		for i := range 6 {
			topic.append(0, rec("a", 0))
			if i%3 == 0 {
				topic.append(1, rec("b", 100*time.Millisecond), rec("b", 0))
				want = append(want, map[int64]uint64{ms(100 * time.Millisecond): 1, ms(0): 2})
			} else {
				want = append(want, map[int64]uint64{ms(0): 1})
			}
			round()
		}
		// The reader stalls for 500 ms, then reads it all at once.
		var backlog0, backlog1 [][]byte
		catchUp := map[int64]uint64{}
		for range 5 {
			backlog0 = append(backlog0, rec("a", 0))
			backlog1 = append(backlog1, rec("b", 0))
			catchUp[ms(0)] = 2
			round()
		}
		want = append(want, catchUp)
		topic.append(0, backlog0...)
		topic.append(1, backlog1...)
		round()

		sink.mu.Lock()
		rounds := byRound(t, sink.flushes)
		sink.mu.Unlock()
		if len(rounds) != 7 {
			t.Fatalf("%d rounds with counts, want 7 (6 live rounds, 1 catch-up)", len(rounds))
		}
		for i, fl := range rounds {
			if got := placed(fl); !maps.Equal(got, want[i]) {
				t.Errorf("round %d places %v, want %v", i+1, got, want[i])
			}
			for _, f := range fl {
				if f.Span >= time.Duration(len(f.Weights))*100*time.Millisecond {
					t.Errorf("round %d: a flush spans %v, past its %d steps of weights", i+1, f.Span, len(f.Weights))
				}
			}
		}
	})
}

// TestLaggingPartitionFlushesApart: a round in which one partition read
// event times that the others did not (it lags them) sends its counts in a
// Flush of their own, before the others', each with its own End and
// weights; an aggregator places each where it happened instead of
// spreading both over the steps of both (issue 41: 5–6 % of a window
// misplaced). A key on both partitions is then sent once per Flush.
func TestLaggingPartitionFlushesApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(3)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		src.assign(0, 1, 2)
		_, stop := startFake(t, Config{Alpha: -1}, src, sink)
		defer stop()
		rec := func(key string, count int, ago time.Duration) []byte {
			return wire.AppendJSON(nil, wire.Event{Key: key, Count: uint64(count), TS: time.Now().Add(-ago).UnixMilli()})
		}
		time.Sleep(50 * time.Millisecond) // mid-step: "now" and 300 ms ago are apart
		topic.append(0, rec("a", 2, 0), rec("both", 1, 0))
		topic.append(1, rec("a", 3, 0))
		topic.append(2, rec("b", 4, 300*time.Millisecond), rec("both", 5, 300*time.Millisecond))
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()

		sink.mu.Lock()
		flushes, calls := slices.Clone(sink.flushes), slices.Clone(sink.calls)
		sink.mu.Unlock()
		if len(flushes) != 2 {
			t.Fatalf("%d sends with counts, want 2 (the lagging partition's, the others')", len(flushes))
		}
		sums := func(cs []Count) map[string]uint64 {
			m := map[string]uint64{}
			for _, c := range cs {
				m[c.Key] += c.N
			}
			return m
		}
		now := time.Now()
		tests := []struct {
			end     time.Time
			weights []uint64
			counts  map[string]uint64
		}{
			{now.Add(-400 * time.Millisecond), []uint64{9}, map[string]uint64{"b": 4, "both": 5}},
			{now.Add(-100 * time.Millisecond), []uint64{6}, map[string]uint64{"a": 5, "both": 1}},
		}
		for i, tt := range tests {
			fl := flushes[i]
			if !fl.End.Equal(tt.end.Truncate(time.Millisecond)) || fl.Span != 0 || !slices.Equal(fl.Weights, tt.weights) {
				t.Errorf("flush %d: End %v, Span %v, Weights %v; want End %v, Span 0, Weights %v",
					i, fl.End, fl.Span, fl.Weights, tt.end, tt.weights)
			}
			if got := sums(calls[i]); !maps.Equal(got, tt.counts) {
				t.Errorf("flush %d: counts %v, want %v", i, got, tt.counts)
			}
		}
		if flushes[0].Seq == flushes[1].Seq {
			t.Errorf("both flushes numbered %d: an aggregator would drop the second as a retry", flushes[0].Seq)
		}
	})
}

// TestRecordsOfTwoStepsCutTheRound: a partition that reads records of two
// steps of event time in one round (a producer's two batches 100 ms apart)
// sends each record's keys with the step it happened in, not spread over
// both: the key of the older batch is placed in the older step only.
func TestRecordsOfTwoStepsCutTheRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(1)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		now := time.Now() // a whole second: steps start at now - k×100 ms
		topic.append(0, wire.AppendBatch(nil, "", now.Add(-150*time.Millisecond).UnixMilli(), []wire.KeyCount{{Key: "old", Count: 3}, {Key: "both", Count: 1}}))
		topic.append(0, wire.AppendBatch(nil, "", now.Add(-50*time.Millisecond).UnixMilli(), []wire.KeyCount{{Key: "new", Count: 4}, {Key: "both", Count: 2}}))
		src.assign(0)
		fls := byRound(t, firstFlushes(t, src, sink))[0]
		sink.mu.Lock()
		calls := slices.Clone(sink.calls)
		sink.mu.Unlock()
		if len(fls) != 2 {
			t.Fatalf("the round sent %d flushes, want 2 (one per step)", len(fls))
		}
		wants := []struct {
			at       int64 // the step
			accesses uint64
			counts   map[string]uint64
		}{
			{now.Add(-200 * time.Millisecond).UnixMilli(), 4, map[string]uint64{"old": 3, "both": 1}},
			{now.Add(-100 * time.Millisecond).UnixMilli(), 6, map[string]uint64{"new": 4, "both": 2}},
		}
		for i, w := range wants {
			if got, want := placed(fls[i:i+1]), map[int64]uint64{w.at: w.accesses}; !maps.Equal(got, want) {
				t.Errorf("flush %d places %v, want %v", i, got, want)
			}
			got := map[string]uint64{}
			for _, c := range calls[i] {
				got[c.Key] += c.N
			}
			if !maps.Equal(got, w.counts) {
				t.Errorf("flush %d sends %v, want %v", i, got, w.counts)
			}
		}
	})
}

// TestFrozenRoundIsFencedBeforeSend: a round that ends long after the
// previous one (the process stood still) is committed before it is sent. A
// member the group dropped meanwhile has its commit refused, so it never
// sends the counts that the partition's next owner reads again and counts.
func TestFrozenRoundIsFencedBeforeSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(1)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		src.assign(0)
		// Every round is fenced; the coordinator has dropped this member.
		topic.commitErr = errors.New("the group has no such member")
		_, stop := startFake(t, Config{Alpha: -1, fenceAfter: time.Nanosecond}, src, sink)
		topic.append(0, []byte(`{"key":"a"}`), []byte(`{"key":"a","count":2}`))
		time.Sleep(time.Second)
		synctest.Wait()
		if got := sink.got(); len(got) != 0 {
			t.Fatalf("sent %v while the commit was refused, want nothing", got)
		}

		// The next generation owns the partition again and reads it from
		// the last committed offset: every access counted once.
		topic.mu.Lock()
		topic.commitErr = nil
		topic.mu.Unlock()
		src.assign(0)
		time.Sleep(time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got, want := sink.got(), map[string]uint64{"default/a": 3}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("sent %v, want %v", got, want)
		}
		if got, want := topic.commits(), map[int]int64{0: 2}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("committed %v, want %v", got, want)
		}
	})
}

// stallingSink stands still for stall in the Send after stallNext was set,
// as a process that is frozen (SIGSTOP) or starved while it sends.
type stallingSink struct {
	*fakeSink
	mu    sync.Mutex
	stall time.Duration
}

func (s *stallingSink) stallNext(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall = d
}

func (s *stallingSink) Send(ctx context.Context, f Flush, counts []Count) error {
	s.mu.Lock()
	d := s.stall
	s.stall = 0
	s.mu.Unlock()
	time.Sleep(d)
	return s.fakeSink.Send(ctx, f, counts)
}

// TestStandstillFencedUntilCommitTaken: after the process stood still, its
// rounds are fenced until a commit is taken, not just the first one. Here
// the first round after the standstill read nothing new, so it has no
// offsets to commit; the round after it reads records that the partition's
// next owner also reads from the last committed offset.
func TestStandstillFencedUntilCommitTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(1)
		src := newFakeSource(topic)
		sink := &stallingSink{fakeSink: newFakeSink(topic)}
		src.assign(0)
		_, stop := startFake(t, Config{Alpha: -1}, src, sink)
		topic.append(0, []byte(`{"key":"a"}`))
		time.Sleep(time.Second)
		synctest.Wait()

		// The process stands still for 3 s in a send, and the group drops
		// it meanwhile. A record arrives once it runs again.
		sink.stallNext(3 * time.Second)
		time.Sleep(time.Second)
		topic.mu.Lock()
		topic.commitErr = errors.New("the group has no such member")
		topic.mu.Unlock()
		time.Sleep(2500 * time.Millisecond)
		topic.append(0, []byte(`{"key":"b"}`))
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := sink.got(), map[string]uint64{"default/a": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("sent %v while the commit was refused, want %v", got, want)
		}

		// The next generation reads b again from the last committed offset.
		topic.mu.Lock()
		topic.commitErr = nil
		topic.mu.Unlock()
		src.assign(0)
		time.Sleep(time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got, want := sink.got(), map[string]uint64{"default/a": 1, "default/b": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("sent %v, want %v", got, want)
		}
	})
}

// TestEarlyRound: a key that turns hot in a record (a producer's batch
// carrying it at the threshold rate or faster) ends the round at once
// instead of at the tick, at most once per tick; the offsets are committed
// only at the tick's round, and a key this partition alone has seen at the
// threshold rate for a window, or one under a bucket's worth, does not end
// a round early.
func TestEarlyRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(2)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		src.assign(0, 1)
		// Ticks every second; the threshold is 1000/s over 1 s in 100 ms
		// buckets: a bucket's worth is 100 accesses, a hot window 1000,
		// each of the 2 partitions' share of it 500.
		d, stop := startFake(t, Config{Flush: time.Second}, src, sink)
		start := time.Now()
		batch := func(kcs ...wire.KeyCount) []byte {
			return wire.AppendBatch(nil, "app", time.Now().UnixMilli(), kcs)
		}
		type check struct {
			name   string
			at     time.Duration // since start, before appending
			part   int
			rec    []wire.KeyCount
			sent   map[string]uint64 // everything sent so far, right after the record
			events []string
			early  float64 // early rounds so far
		}
		for _, c := range []check{
			{"a key turning hot ends the round", 1500 * time.Millisecond, 0,
				[]wire.KeyCount{{Key: "hot", Count: 1200}, {Key: "cold", Count: 50}},
				map[string]uint64{"app/hot": 1200, "app/cold": 50}, []string{"send"}, 1},
			{"one early round per tick", 1500 * time.Millisecond, 1,
				[]wire.KeyCount{{Key: "other", Count: 600}},
				map[string]uint64{"app/hot": 1200, "app/cold": 50}, []string{"send"}, 1},
			{"the tick sends the rest and commits both", 2050 * time.Millisecond, -1, nil,
				map[string]uint64{"app/hot": 1200, "app/cold": 50, "app/other": 600},
				[]string{"send", "send", "commit 0=1 1=1"}, 1},
			{"a key hot on this partition alone waits for the tick", 2050 * time.Millisecond, 0,
				[]wire.KeyCount{{Key: "hot", Count: 300}},
				map[string]uint64{"app/hot": 1200, "app/cold": 50, "app/other": 600},
				[]string{"send", "send", "commit 0=1 1=1"}, 1},
			{"a key under a bucket's worth waits for the tick", 2050 * time.Millisecond, 1,
				[]wire.KeyCount{{Key: "warm", Count: 99}},
				map[string]uint64{"app/hot": 1200, "app/cold": 50, "app/other": 600},
				[]string{"send", "send", "commit 0=1 1=1"}, 1},
			{"the next tick", 3050 * time.Millisecond, -1, nil,
				map[string]uint64{"app/hot": 1500, "app/cold": 50, "app/other": 600, "app/warm": 99},
				[]string{"send", "send", "commit 0=1 1=1", "send", "commit 0=2 1=2"}, 1},
			{"after a tick a key may end a round early again", 3050 * time.Millisecond, 1,
				[]wire.KeyCount{{Key: "new", Count: 600}},
				map[string]uint64{"app/hot": 1500, "app/cold": 50, "app/other": 600, "app/warm": 99, "app/new": 600},
				[]string{"send", "send", "commit 0=1 1=1", "send", "commit 0=2 1=2", "send"}, 2},
		} {
			time.Sleep(c.at - time.Since(start))
			if c.rec != nil {
				topic.append(c.part, batch(c.rec...))
			}
			synctest.Wait()
			if got := sink.got(); fmt.Sprint(got) != fmt.Sprint(c.sent) {
				t.Errorf("%s: sent %v, want %v", c.name, got, c.sent)
			}
			if got := topic.eventLog(); fmt.Sprint(got) != fmt.Sprint(c.events) {
				t.Errorf("%s: events %v, want %v", c.name, got, c.events)
			}
			if got := testutil.ToFloat64(d.m.earlyRounds); got != c.early {
				t.Errorf("%s: early_rounds_total %v, want %v", c.name, got, c.early)
			}
		}
		sink.mu.Lock()
		first := sink.flushes[0]
		sink.mu.Unlock()
		if want := start.Add(1500 * time.Millisecond); !first.At.Equal(want) {
			t.Errorf("the early round ended at %v, want %v", first.At.Sub(start), want.Sub(start))
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got, want := topic.commits(), map[int]int64{0: 2, 1: 3}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("committed %v at the end, want %v", got, want)
		}
	})
}

// TestLatePartitionHeldAcrossRebalance: partition 1's records stop, and a
// rebalance follows at once (a broker's restart holds up the partition's
// writes and moves the group's coordinator). The next generation, which
// keeps both partitions, goes on with their cadences: it holds the reach at
// partition 1's last event time from its first rounds, as the last one
// would have, instead of waiting for a cadence the partition cannot show.
func TestLatePartitionHeldAcrossRebalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topic := newFakeTopic(2)
		src := newFakeSource(topic)
		sink := newFakeSink(topic)
		src.assign(0, 1)
		_, stop := startFake(t, Config{Alpha: -1, Flush: 100 * time.Millisecond}, src, sink)
		var last int64 // partition 1's last event time, Unix ms
		rec := func(p int) {
			last = time.Now().Add(-50 * time.Millisecond).UnixMilli()
			topic.append(p, fmt.Appendf(nil, `{"key":"k","ts":%d}`, last))
		}
		for range 20 {
			rec(0)
			rec(1)
			time.Sleep(100 * time.Millisecond)
		}
		held := last
		src.assign(0, 1) // the rebalance
		time.Sleep(time.Millisecond)
		synctest.Wait()
		sink.mu.Lock()
		before := len(sink.flushes)
		sink.mu.Unlock()
		for range 10 {
			rec(0)
			time.Sleep(100 * time.Millisecond)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		var reaches []string // per round: its Reach after partition 1's last event time
		n := 0
		for _, f := range sink.flushes[before:] {
			switch {
			case f.Reach.IsZero():
				reaches = append(reaches, "none")
			case f.Reach.UnixMilli() == held:
				n++
				fallthrough
			default:
				reaches = append(reaches, fmt.Sprintf("%+dms", f.Reach.UnixMilli()-held))
			}
		}
		t.Logf("the new generation's rounds with counts, Reach after partition 1's last event time: %v", reaches)
		if n < 7 {
			t.Errorf("%d of the new generation's %d rounds with counts held the reach at partition 1's last event time, want 7 or more", n, len(reaches))
		}
	})
}
