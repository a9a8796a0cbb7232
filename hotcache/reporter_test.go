package hotcache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// memSink decodes what the reporter sends.
type memSink struct {
	mu      sync.Mutex // guards counts and records
	counts  map[string]uint64
	apps    map[string]bool
	records int
	fail    error
}

func (s *memSink) send(ctx context.Context, rec []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.records++
	var d wire.Decoder
	return d.Decode(rec, func(e *wire.Entry) {
		s.counts[string(e.Key)] += e.Count
		s.apps[string(e.App)] = true
	})
}

func (s *memSink) close() error { return nil }

func TestReporterSumsHotAndCold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &memSink{counts: map[string]uint64{}, apps: map[string]bool{}}
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
			tab.add(fmt.Sprint("k", i), 2)
		}
		kept, sum := 0, uint64(0)
		tab.drain(func(key string, n uint64) { kept++; sum += n })
		dropped := tab.dropped.Load()
		if kept > tt.wantKept || (tt.wantKept == tt.distinct && kept != tt.distinct) {
			t.Errorf("maxKeys %d, %d keys: kept %d, want <= %d", tt.maxKeys, tt.distinct, kept, tt.wantKept)
		}
		if sum+dropped != uint64(2*tt.distinct) {
			t.Errorf("maxKeys %d, %d keys: counted %d + dropped %d, want %d", tt.maxKeys, tt.distinct, sum, dropped, 2*tt.distinct)
		}
		kept = 0
		tab.drain(func(string, uint64) { kept++ })
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
	rep := &reporter{app: "shop", every: time.Second, table: tab, hot: func(func(string, uint64)) {}, sink: sink, m: c.m}
	tab.add("k", 5)
	rep.flush(context.Background())
	tab.add("k", 1)
	rep.flush(context.Background())
	if got := testCounter(t, c.m.reportDropped.WithLabelValues("kafka")); got != 6 {
		t.Errorf("dropped = %v, want 6", got)
	}
}
