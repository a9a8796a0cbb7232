package hotcache

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// add counts n accesses of op that moved bytes.
func (t *tally) add(op wire.Op, n, bytes uint64) {
	if op == wire.OpWrite {
		t.writes += n
		t.writeBytes += bytes
		return
	}
	t.reads += n
	t.readBytes += bytes
}

// memSink decodes what the reporter sends.
type memSink struct {
	mu       sync.Mutex // guards every field but fail
	counts   map[string]uint64
	tallies  map[string]tally // nil: not kept
	apps     map[string]bool
	srcs     map[string]bool // sources of access and effect batches
	versions map[byte]int    // records by batch version
	effects  map[string]wire.EffectCounts
	periods  []int64 // of the effect batches, in order
	records  int
	fail     error
}

func newMemSink() *memSink {
	return &memSink{counts: map[string]uint64{}, tallies: map[string]tally{}, apps: map[string]bool{},
		srcs: map[string]bool{}, versions: map[byte]int{}, effects: map[string]wire.EffectCounts{}}
}

func (s *memSink) onEffect(e *wire.EffectEntry) {
	if s.effects == nil {
		return
	}
	if len(s.periods) == 0 || e.Period != s.periods[len(s.periods)-1] {
		s.periods = append(s.periods, e.Period)
	}
	s.srcs[string(e.Src)] = true
	s.apps[string(e.App)] = true
	ec := s.effects[string(e.Key)]
	ec.L1Hits += e.L1Hits
	ec.L2Reads += e.L2Reads
	ec.SourceLoads += e.SourceLoads
	ec.Limited += e.Limited
	s.effects[string(e.Key)] = ec
}

// effect returns what the effect batches received so far say of key.
func (s *memSink) effect(key string) wire.EffectCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects[key]
}

func (s *memSink) send(ctx context.Context, rec []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.records++
	if s.versions != nil && len(rec) > 1 {
		s.versions[rec[1]]++
	}
	d := wire.Decoder{OnEffect: s.onEffect}
	return d.Decode(rec, func(e *wire.Entry) {
		s.counts[string(e.Key)] += e.Count
		s.apps[string(e.App)] = true
		if s.srcs != nil {
			s.srcs[string(e.Src)] = true
		}
		if s.tallies != nil {
			t := s.tallies[string(e.Key)]
			t.add(e.Op, e.Count, e.Bytes)
			s.tallies[string(e.Key)] = t
		}
	})
}

func (s *memSink) tally(key string) tally {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tallies[key]
}

func (s *memSink) close() error { return nil }

func TestReporterSumsHotAndCold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newMemSink()
		c := newClient(t, WithLoader(newSource("hot", "1", "cold", "2")), withSink(sink))
		promote(t, c, "hot")
		for range 1000 {
			get(t, c, "hot")
		}
		for range 10 {
			get(t, c, "cold")
		}
		time.Sleep(100 * time.Millisecond) // one report interval
		synctest.Wait()
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if got := sink.counts; got["hot"] != 1000 || got["cold"] != 10 || !sink.apps["shop"] {
			t.Errorf("reported %v for apps %v, want hot:1000 cold:10 for shop", got, sink.apps)
		}
		if got := c.m.l1Hits.Load(); got != 1000 {
			t.Errorf("l1 hits = %d, want 1000", got)
		}
	})
}

func TestCountTableBounded(t *testing.T) {
	tests := []struct {
		maxKeys, distinct, wantKept int
	}{
		{maxKeys: 4096, distinct: 100, wantKept: 100},
		{maxKeys: 64 * 4, distinct: 100_000, wantKept: 64 * 4},
	}
	for _, tt := range tests {
		tab := newCountTable(tt.maxKeys)
		for i := range tt.distinct {
			tab.add(fmt.Sprint("k", i), wire.OpRead, 2, 10)
		}
		kept, sum := 0, uint64(0)
		tab.drain(func(key string, t tally) { kept++; sum += t.reads })
		dropped := tab.dropped.Load()
		if kept > tt.wantKept || (tt.wantKept == tt.distinct && kept != tt.distinct) {
			t.Errorf("maxKeys %d, %d keys: kept %d, want <= %d", tt.maxKeys, tt.distinct, kept, tt.wantKept)
		}
		if sum+dropped != uint64(2*tt.distinct) {
			t.Errorf("maxKeys %d, %d keys: counted %d + dropped %d, want %d", tt.maxKeys, tt.distinct, sum, dropped, 2*tt.distinct)
		}
		kept = 0
		tab.drain(func(string, tally) { kept++ })
		if kept != 0 {
			t.Errorf("second drain: %d keys, want 0", kept)
		}
	}
}

func TestReporterDropsWhenKafkaFails(t *testing.T) {
	sink := &memSink{counts: map[string]uint64{}, apps: map[string]bool{}, fail: errBacklog}
	c := newClient(t)
	// A reporter of its own over a table of its own: the Client's reporter
	// must be the only one draining c.table.
	tab := newCountTable(1024)
	rep := &reporter{app: "shop", every: time.Second, table: tab, hot: func(func(string, tally)) {}, sink: sink, m: c.m}
	tab.add("k", wire.OpRead, 5, 50)
	rep.flush(context.Background())
	tab.add("k", wire.OpRead, 1, 10)
	tab.add("k", wire.OpWrite, 2, 0)
	rep.flush(context.Background())
	if got := testCounter(t, c.m.reportDropped.WithLabelValues("kafka")); got != 8 {
		t.Errorf("dropped = %v, want 8", got)
	}
}

// slowSink is a sink whose first send takes a while, as a Kafka writer's
// first write does while it learns the topic's partitions, and gives up
// when its ctx ends, as that one does.
type slowSink struct {
	*memSink
	entered chan struct{} // closed when the first send starts
	once    sync.Once
}

func (s *slowSink) send(ctx context.Context, rec []byte) error {
	first := false
	s.once.Do(func() { first = true; close(s.entered) })
	if first {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return s.memSink.send(ctx, rec)
}

// TestReporterCloseKeepsSendUnderWay: a Client that closes while its
// reporter is in a send lets that send finish; it used to cut it short,
// losing the batch (a short-lived Client lost every access it made).
func TestReporterCloseKeepsSendUnderWay(t *testing.T) {
	sink := &slowSink{memSink: newMemSink(), entered: make(chan struct{})}
	c := newClient(t)
	tab := newCountTable(1024)
	rep := &reporter{app: "shop", every: 10 * time.Millisecond, table: tab, hot: func(func(string, tally)) {}, sink: sink, m: c.m}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rep.run(ctx) }()
	tab.add("k", wire.OpRead, 3, 30)
	<-sink.entered
	cancel() // Close, while the send is under way
	<-done
	if got := sink.tally("k"); got.reads != 3 {
		t.Errorf("k reported as %+v, want 3 reads", got)
	}
	if got := testCounter(t, c.m.reportDropped.WithLabelValues("kafka")); got != 0 {
		t.Errorf("dropped %v accesses, want none", got)
	}
}

// TestReporterBadKeys: keys the wire format cannot carry (not UTF-8, too
// long) are counted as dropped; the others in the same flush are sent.
func TestReporterBadKeys(t *testing.T) {
	sink := newMemSink()
	c := newClient(t)
	tab := newCountTable(1024)
	rep := &reporter{app: "shop", every: time.Second, table: tab, hot: func(func(string, tally)) {}, sink: sink, m: c.m}
	tab.add("ok", wire.OpRead, 3, 30)
	tab.add("bin:\xff\xfe", wire.OpRead, 2, 0)
	tab.add(strings.Repeat("k", wire.DefaultMaxKeyLen+1), wire.OpWrite, 4, 0)
	rep.flush(context.Background())
	if got := testCounter(t, c.m.reportDropped.WithLabelValues("bad_key")); got != 6 {
		t.Errorf("dropped bad_key = %v, want 6", got)
	}
	if got := sink.tally("ok"); got.reads != 3 {
		t.Errorf("ok reported as %+v, want 3 reads", got)
	}
}

// TestReporterReadsWritesBytes checks what one report interval sends for
// each kind of access: Gets served from L1, from the Loader and of a
// missing key, Sets and Deletes, as version 3 entries (with the instance's
// name) with their op and bytes summed per key.
func TestReporterReadsWritesBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newMemSink()
		src := newSource("hot", "12345", "cold", "abc")
		c := newClient(t, WithLoader(src), withSink(sink), WithInstanceID("shop-7"))
		promote(t, c, "hot")
		ctx := context.Background()
		for range 100 {
			get(t, c, "hot") // L1: 5 bytes each
		}
		for range 3 {
			get(t, c, "cold") // Loader, then the fallback cache or Loader again: 3 bytes each
		}
		if _, err := c.Get(ctx, "missing"); err == nil {
			t.Fatal("Get(missing): nil error, want ErrNotFound")
		}
		if err := c.Set(ctx, "cold", []byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		if err := c.Set(ctx, "hot", []byte("xy")); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // one report interval
		synctest.Wait()

		tests := []struct {
			key  string
			want tally
		}{
			{"hot", tally{reads: 100, readBytes: 500, writes: 1, writeBytes: 2}},
			{"cold", tally{reads: 3, readBytes: 9, writes: 1, writeBytes: 10}},
			{"missing", tally{reads: 1}},
			{"gone", tally{writes: 1}},
		}
		for _, tt := range tests {
			if got := sink.tally(tt.key); got != tt.want {
				t.Errorf("%s: reported %+v, want %+v", tt.key, got, tt.want)
			}
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if sink.versions[3] == 0 || len(sink.versions) != 1 {
			t.Errorf("batch versions sent: %v, want only version 3", sink.versions)
		}
		if !sink.srcs["shop-7"] || len(sink.srcs) != 1 {
			t.Errorf("batch sources: %v, want only shop-7", sink.srcs)
		}
	})
}

// TestReporterSampledBytes checks that a sampled access reports its bytes
// scaled like its count.
func TestReporterSampledBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newMemSink()
		c := newClient(t, WithLoader(newSource("hot", "1234")), withSink(sink), WithReporting(0, 0, 4))
		promote(t, c, "hot")
		for range 4000 {
			get(t, c, "hot")
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		got := sink.tally("hot")
		if got.reads%4 != 0 || got.readBytes != 4*got.reads || got.reads < 3000 || got.reads > 5000 {
			t.Errorf("reported %+v for 4000 reads of 4 bytes sampled 1 in 4, want reads a multiple of 4 near 4000 and 4 bytes each", got)
		}
	})
}

func TestAppendTally(t *testing.T) {
	tests := []struct {
		t    tally
		want []wire.Access
	}{
		{tally{}, nil},
		{tally{reads: 3, readBytes: 30}, []wire.Access{{Key: "k", Count: 3, Bytes: 30, Op: wire.OpRead}}},
		{tally{writes: 2}, []wire.Access{{Key: "k", Count: 2, Op: wire.OpWrite}}},
		{tally{reads: 1, readBytes: 7, writes: 1, writeBytes: 9}, []wire.Access{{Key: "k", Count: 1, Bytes: 7, Op: wire.OpRead}, {Key: "k", Count: 1, Bytes: 9, Op: wire.OpWrite}}},
	}
	for _, tt := range tests {
		got, n := appendTally(nil, "k", tt.t)
		if !slices.Equal(got, tt.want) || n != len(tt.want) {
			t.Errorf("appendTally(%+v) = %+v, %d; want %+v", tt.t, got, n, tt.want)
		}
	}
}

// TestCountTableReadsAndWrites sums reads and writes of one key apart, and
// bounds the keys of both together.
func TestCountTableReadsAndWrites(t *testing.T) {
	tab := newCountTable(countStripes) // one key per stripe
	tab.add("k", wire.OpRead, 2, 20)
	tab.add("k", wire.OpWrite, 1, 7) // a second key slot of the stripe: does not fit
	tab.add("k", wire.OpRead, 3, 30)
	got := map[string]tally{}
	tab.drain(func(key string, c tally) {
		g := got[key]
		g.reads, g.readBytes = g.reads+c.reads, g.readBytes+c.readBytes
		g.writes, g.writeBytes = g.writes+c.writes, g.writeBytes+c.writeBytes
		got[key] = g
	})
	if want := (tally{reads: 5, readBytes: 50}); got["k"] != want || tab.dropped.Load() != 1 {
		t.Errorf("drained %+v, dropped %d; want %+v and the write dropped", got, tab.dropped.Load(), want)
	}

	tab = newCountTable(1024)
	tab.add("k", wire.OpRead, 2, 20)
	tab.add("k", wire.OpWrite, 1, 7)
	tab.add("k", wire.OpWrite, 1, 3)
	var calls []tally
	tab.drain(func(key string, c tally) { calls = append(calls, c) })
	want := []tally{{reads: 2, readBytes: 20}, {writes: 2, writeBytes: 10}}
	if !slices.Equal(calls, want) {
		t.Errorf("drained %+v, want %+v", calls, want)
	}
}
