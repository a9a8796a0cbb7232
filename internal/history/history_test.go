package history_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/hotset/decision"
	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/history"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// newStore returns a Store on the real Redis with a prefix of its own; the
// test's streams are deleted at cleanup.
func newStore(t testing.TB, cfg history.Config) (*history.Store, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: stacktest.Redis(t)})
	t.Cleanup(func() { rdb.Close() })
	cfg.Prefix = "hotspot:history:" + stacktest.Name(t) + "/"
	s, err := history.New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, cfg.Prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	return s, rdb
}

func ms(base time.Time, n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }

func TestWriteAndQuery(t *testing.T) {
	s, _ := newStore(t, history.Config{})
	ctx := context.Background()
	// Stored now, so "at" must be within MaxDelay (30 s) of now, as Run
	// guarantees: the queries map times to IDs that way.
	base := time.Now().Truncate(time.Millisecond).Add(-20 * time.Second)
	var ds []decision.Decision
	for i := range 10 { // k0..k4 promoted at +0..+4 s, then demoted at +5..+9 s
		kind, key := decision.Promoted, fmt.Sprintf("k%d", i%5)
		if i >= 5 {
			kind = decision.Demoted
		}
		ds = append(ds, decision.Decision{App: "shop", Key: key, Kind: kind, At: ms(base, 1000*i), Rate: float64(1000 + i), Rule: decision.DefaultRule})
	}
	ds = append(ds, decision.Decision{App: "other", Key: "k0", Kind: decision.Promoted, At: base, Rate: 5000, Rule: -1})
	if err := s.Write(ctx, ds); err != nil {
		t.Fatal(err)
	}
	keys := func(evs []hotspotapi.HistoryEvent) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Kind[:1]+e.Key)
		}
		return out
	}
	tests := []struct {
		name string
		q    history.Query
		want []string // kind initial + key, newest first
	}{
		{"all, newest first", history.Query{App: "shop"}, []string{"dk4", "dk3", "dk2", "dk1", "dk0", "pk4", "pk3", "pk2", "pk1", "pk0"}},
		{"limit", history.Query{App: "shop", Limit: 3}, []string{"dk4", "dk3", "dk2"}},
		{"key", history.Query{App: "shop", Key: "k2"}, []string{"dk2", "pk2"}},
		{"key and limit", history.Query{App: "shop", Key: "k2", Limit: 1}, []string{"dk2"}},
		{"since is inclusive", history.Query{App: "shop", Since: ms(base, 7000)}, []string{"dk4", "dk3", "dk2"}},
		{"until is inclusive", history.Query{App: "shop", Until: ms(base, 1000)}, []string{"pk1", "pk0"}},
		{"range", history.Query{App: "shop", Since: ms(base, 3500), Until: ms(base, 6000)}, []string{"dk1", "dk0", "pk4"}},
		{"range and key", history.Query{App: "shop", Key: "k4", Since: ms(base, 3500), Until: ms(base, 6000)}, []string{"pk4"}},
		{"other app", history.Query{App: "other"}, []string{"pk0"}},
		{"unknown app", history.Query{App: "nobody"}, nil},
		{"future", history.Query{App: "shop", Since: time.Now().Add(time.Hour)}, nil},
	}
	for _, tt := range tests {
		res, err := s.Query(ctx, tt.q)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got := keys(res.Events); !slices.Equal(got, tt.want) || res.App != tt.q.App || res.Truncated {
			t.Errorf("%s: got %v (app %q, truncated %v), want %v", tt.name, got, res.App, res.Truncated, tt.want)
		}
	}
	res, _ := s.Query(ctx, history.Query{App: "shop", Limit: 1})
	want := hotspotapi.HistoryEvent{At: ms(base, 9000).UTC(), Key: "k4", Kind: "demoted", Rate: 1009, Rule: -1}
	if len(res.Events) != 1 || !reflect.DeepEqual(res.Events[0], want) {
		t.Errorf("newest event = %+v, want %+v", res.Events, want)
	}
}

// TestSourcesKept: a promotion's sources are stored with it and read back,
// busiest first; an entry written before sources existed (no sources
// field) still reads, without them.
func TestSourcesKept(t *testing.T) {
	s, rdb := newStore(t, history.Config{})
	ctx := context.Background()
	at := time.Now().Truncate(time.Millisecond).Add(-time.Second)
	src := []decision.SourceShare{{Source: "web-1", Share: 0.7}, {Source: "10.0.0.7:41234", Share: 0.2}}
	// An old hotspotd's entry, as it wrote them.
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.Stream("shop"), Values: []any{
		"v", "1", "at", at.Add(-time.Second).UnixMilli(), "key", "old", "kind", "promoted", "rate", "1500", "rule", -1,
	}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, []decision.Decision{
		{App: "shop", Key: "k", Kind: decision.Promoted, At: at, Rate: 3000, Rule: -1, Sources: src},
		{App: "shop", Key: "k", Kind: decision.Demoted, At: at.Add(time.Millisecond), Rate: 10, Rule: -1},
	}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Query(ctx, history.Query{App: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	want := []hotspotapi.HistoryEvent{
		{At: at.Add(time.Millisecond).UTC(), Key: "k", Kind: "demoted", Rate: 10, Rule: -1},
		{At: at.UTC(), Key: "k", Kind: "promoted", Rate: 3000, Rule: -1, Sources: []hotspotapi.SourceShare{{Source: "web-1", Share: 0.7}, {Source: "10.0.0.7:41234", Share: 0.2}}},
		{At: at.Add(-time.Second).UTC(), Key: "old", Kind: "promoted", Rate: 1500, Rule: -1},
	}
	if !reflect.DeepEqual(res.Events, want) {
		t.Errorf("events = %+v, want %+v", res.Events, want)
	}
	// The key's index has them too; the JSON names them as docs/history.md says.
	res, _ = s.Query(ctx, history.Query{App: "shop", Key: "k", Limit: 1, Since: at, Until: at})
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"sources":[{"source":"web-1","share":0.7},{"source":"10.0.0.7:41234","share":0.2}]`) {
		t.Errorf("query of the key = %s, want its sources", b)
	}
}

func TestQueryErrors(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		q    history.Query
	}{
		{"no app", history.Query{}},
		{"limit too big", history.Query{App: "a", Limit: history.MaxLimit + 1}},
		{"negative limit", history.Query{App: "a", Limit: -1}},
		{"until before since", history.Query{App: "a", Since: now, Until: now.Add(-time.Second)}},
	}
	for _, tt := range tests {
		if err := tt.q.Check(); err == nil {
			t.Errorf("%s: Check(%+v) = nil, want an error", tt.name, tt.q)
		}
	}
}

func TestQueryStopsAfterMaxScan(t *testing.T) {
	s, _ := newStore(t, history.Config{MaxScan: 1500})
	ctx := context.Background()
	now := time.Now()
	var ds []decision.Decision
	for i := range 2000 {
		ds = append(ds, decision.Decision{App: "a", Key: fmt.Sprint(i), Kind: decision.Promoted, At: now})
	}
	if err := s.Write(ctx, ds); err != nil {
		t.Fatal(err)
	}
	// Stored now, so within the slack of a range that ended 20 s ago:
	// every entry is read, none matches.
	res, err := s.Query(ctx, history.Query{App: "a", Until: now.Add(-20 * time.Second)})
	if err != nil || len(res.Events) != 0 || !res.Truncated {
		t.Errorf("query past MaxScan = %d events, truncated %v, %v; want none, truncated", len(res.Events), res.Truncated, err)
	}
	// A key's query reads its index alone.
	res, err = s.Query(ctx, history.Query{App: "a", Key: "1234"})
	if err != nil || len(res.Events) != 1 || res.Events[0].Key != "1234" || res.Truncated {
		t.Errorf("query of one key among 2000 = %+v, %v; want its event", res, err)
	}
}

func TestKeyIndexBoundAndExpiry(t *testing.T) {
	s, rdb := newStore(t, history.Config{MaxPerKey: 10, Retention: time.Hour})
	ctx := context.Background()
	var ds []decision.Decision
	for range 500 {
		ds = append(ds, decision.Decision{App: "a", Key: "k", Kind: decision.Promoted, At: time.Now()})
	}
	if err := s.Write(ctx, ds); err != nil {
		t.Fatal(err)
	}
	ks := s.KeyStream("a", "k")
	if n := rdb.XLen(ctx, ks).Val(); n < 10 || n > 200 {
		t.Errorf("index length after 500 events with MaxPerKey 10 = %d, want 10 to 200", n)
	}
	if ttl := rdb.PTTL(ctx, ks).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("index TTL = %v, want the retention (1h)", ttl)
	}
	if ks == s.Stream("a") || ks == s.Stream("a/k") {
		t.Errorf("index %q collides with an app's stream", ks)
	}
}

func TestTrimming(t *testing.T) {
	s, rdb := newStore(t, history.Config{MaxLen: 10})
	ctx := context.Background()
	var ds []decision.Decision
	for i := range 1000 {
		ds = append(ds, decision.Decision{App: "a", Key: fmt.Sprint(i), Kind: decision.Promoted, At: time.Now()})
	}
	for i := 0; i < len(ds); i += 100 {
		if err := s.Write(ctx, ds[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}
	// MAXLEN ~ trims whole internal nodes (100 entries by default).
	if n := rdb.XLen(ctx, s.Stream("a")).Val(); n < 10 || n > 200 {
		t.Errorf("stream length after 1000 events with MaxLen 10 = %d, want 10 to 200", n)
	}

	old, rdb := newStore(t, history.Config{})
	for i := 0; i < len(ds); i += 100 {
		if err := old.Write(ctx, ds[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	// A store with a short retention (a restarted hotspotd) trims by age.
	aged, err := history.New(rdb, history.Config{Prefix: strings.TrimSuffix(old.Stream("a"), "a"), Retention: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := aged.Write(ctx, ds[:1]); err != nil {
		t.Fatal(err)
	}
	if n := rdb.XLen(ctx, old.Stream("a")).Val(); n > 100 {
		t.Errorf("stream length after trimming by age = %d, want at most 100 (one node)", n)
	}
}

func TestDropsWhatCannotBeStored(t *testing.T) {
	// Nothing listens on port 1: every write fails at once.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	reg := prometheus.NewRegistry()
	s, err := history.New(rdb, history.Config{Queue: 4, MaxDelay: 300 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	d := decision.Decision{App: "a", Key: "k", Kind: decision.Promoted, At: time.Now()}
	s.Record([]decision.Decision{d, d, d, d, d, d}) // two more than the queue holds
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- s.Run(ctx) }()
	for {
		if n := testutil.ToFloat64(dropped(t, reg, "redis")); n == 4 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("dropped{redis} = %v after 10s, want 4", testutil.ToFloat64(dropped(t, reg, "redis")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := time.Since(start); got < 250*time.Millisecond {
		t.Errorf("events dropped after %v, want after retrying for MaxDelay (300ms)", got)
	}
	if n := testutil.ToFloat64(dropped(t, reg, "queue_full")); n != 2 {
		t.Errorf("dropped{queue_full} = %v, want 2", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

func dropped(t *testing.T, reg *prometheus.Registry, reason string) prometheus.Collector {
	t.Helper()
	return collectorFor{reg: reg, reason: reason}
}

// collectorFor exposes one series of hotspot_history_events_dropped_total.
type collectorFor struct {
	reg    *prometheus.Registry
	reason string
}

func (c collectorFor) Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc("x", "x", nil, nil)
}

func (c collectorFor) Collect(ch chan<- prometheus.Metric) {
	mfs, _ := c.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "hotspot_history_events_dropped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == c.reason {
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("x", "x", nil, nil), prometheus.CounterValue, m.GetCounter().GetValue())
			}
		}
	}
}

func TestRunWritesRecordedEvents(t *testing.T) {
	s, _ := newStore(t, history.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	at := time.Now().Truncate(time.Millisecond)
	s.Record([]decision.Decision{{App: "a", Key: "k", Kind: decision.Promoted, At: at, Rate: 1200, Rule: -1}})
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := s.Query(context.Background(), history.Query{App: "a"})
		if err == nil && len(res.Events) == 1 {
			if want := (hotspotapi.HistoryEvent{At: at.UTC(), Key: "k", Kind: "promoted", Rate: 1200, Rule: -1}); !reflect.DeepEqual(res.Events[0], want) {
				t.Errorf("event = %+v, want %+v", res.Events[0], want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recorded event not stored after 5s: %+v, %v", res, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Shutdown writes what is still queued.
	s.Record([]decision.Decision{{App: "a", Key: "last", Kind: decision.Demoted, At: at}})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	res, _ := s.Query(context.Background(), history.Query{App: "a", Key: "last"})
	if len(res.Events) != 1 {
		t.Errorf("event recorded just before shutdown: stored %d times, want once", len(res.Events))
	}
}
