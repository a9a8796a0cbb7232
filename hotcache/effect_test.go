package hotcache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

func TestDefaultInstance(t *testing.T) {
	tests := []struct {
		name     string
		hostname func() (string, error)
		want     string
	}{
		{"host name", func() (string, error) { return "web-3", nil }, "web-3/42"},
		{"no host name", func() (string, error) { return "", errors.New("no uname") }, "pid-42"},
		{"empty host name", func() (string, error) { return "", nil }, "pid-42"},
		{"host name not UTF-8", func() (string, error) { return "web-\xff", nil }, "pid-42"},
	}
	for _, tt := range tests {
		if got := defaultInstance(tt.hostname, 42); got != tt.want {
			t.Errorf("%s: defaultInstance = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestInstanceOption(t *testing.T) {
	want := defaultInstance(os.Hostname, os.Getpid())
	for _, tt := range []struct {
		name string
		opts []Option
		want string
	}{
		{"default", nil, want},
		{"empty keeps the default", []Option{WithInstanceID("")}, want},
		{"named", []Option{WithInstanceID("shop-7f9c/1")}, "shop-7f9c/1"},
		{"longest", []Option{WithInstanceID(strings.Repeat("i", wire.DefaultMaxKeyLen))}, strings.Repeat("i", wire.DefaultMaxKeyLen)},
	} {
		c := newClient(t, tt.opts...)
		if got := c.Instance(); got != tt.want {
			t.Errorf("%s: Instance() = %q, want %q", tt.name, got, tt.want)
		}
	}
	for _, tt := range []struct {
		name string
		id   string
	}{
		{"too long", strings.Repeat("i", wire.DefaultMaxKeyLen+1)},
		{"not UTF-8", "shop-\xff"},
	} {
		if c, err := New(context.Background(), WithApp("shop"), WithInstanceID(tt.id)); err == nil {
			c.Close()
			t.Errorf("%s: New = nil error, want one", tt.name)
		}
	}
}

// hotWithoutValue puts key in c's hot table with an entry that never gets a
// value (as if every load raced with a demotion): each Get of it misses L1
// and reads the backends. It is not queued for a load; the refresher may
// still load it in the background, which no Get counts.
func hotWithoutValue(c *Client, key string) *hotEntry {
	e := &hotEntry{key: key, promoted: time.Now(), dead: true}
	c.hotMu.Lock()
	next := maps.Clone(c.hot.Load().m)
	next[key] = e
	c.hot.Store(&hotTable{m: next})
	c.hotMu.Unlock()
	return e
}

// TestEffectPaths checks which path of a Get of a hot key counts in which of
// its effect counters, as the last effect report (at Close) carries them,
// without Redis: every backend read goes to the Loader.
func TestEffectPaths(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		// run makes the Gets of key "k" (its source value "v").
		run  func(t *testing.T, c *Client)
		want wire.EffectCounts
	}{
		{"served from L1", nil, func(t *testing.T, c *Client) {
			promote(t, c, "k")
			for range 100 {
				get(t, c, "k")
			}
		}, wire.EffectCounts{L1Hits: 100}},
		{"not found, from L1", nil, func(t *testing.T, c *Client) {
			promote(t, c, "k")
			if err := c.o.loader.(*source).Delete(context.Background(), "k"); err != nil {
				t.Fatal(err)
			}
			c.dropLocal("k")
			synctest.Wait() // reloaded as "not found"
			for range 5 {
				if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get = %v, want ErrNotFound", err)
				}
			}
		}, wire.EffectCounts{L1Hits: 5}},
		{"no L1 value, no Redis: the Loader", nil, func(t *testing.T, c *Client) {
			hotWithoutValue(c, "k")
			for range 3 {
				get(t, c, "k")
			}
		}, wire.EffectCounts{SourceLoads: 3}},
		{"stale value, hot bucket empty", []Option{WithHotReadLimit(1)}, func(t *testing.T, c *Client) {
			promote(t, c, "k") // the load takes the only token
			for range 30 {
				get(t, c, "k")
			}
			e := c.hot.Load().m["k"]
			s := *e.val.Load()
			s.stale = true
			e.val.Store(&s)
			for range 20 {
				if _, served, err := c.Lookup(context.Background(), "k"); err != nil || served != Stale {
					t.Fatalf("Lookup = %v, %v; want the stale value", served, err)
				}
			}
		}, wire.EffectCounts{L1Hits: 30, Limited: 20}},
		{"no L1 value, hot bucket empty", []Option{WithHotReadLimit(1)}, func(t *testing.T, c *Client) {
			hotWithoutValue(c, "k")
			get(t, c, "k") // the only token: a load
			for range 3 {
				if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrThrottled) {
					t.Fatalf("Get = %v, want ErrThrottled", err)
				}
			}
		}, wire.EffectCounts{SourceLoads: 1, Limited: 3}},
		{"no L1 value, Loader bucket empty", []Option{WithLoaderLimit(2)}, func(t *testing.T, c *Client) {
			hotWithoutValue(c, "k")
			get(t, c, "k") // the Loader token that the read of "cold" left
			if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrThrottled) {
				t.Fatalf("Get = %v, want ErrThrottled", err)
			}
		}, wire.EffectCounts{SourceLoads: 1, Limited: 1}},
		{"sampled 1 in 4", []Option{WithReporting(0, 0, 4)}, func(t *testing.T, c *Client) {
			hotWithoutValue(c, "k")
			for range 400 {
				get(t, c, "k")
			}
		}, wire.EffectCounts{SourceLoads: 400}}, // checked as a multiple of 4 near 400, and no L1 hit
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := newMemSink()
				c := newClient(t, append([]Option{WithLoader(newSource("k", "v", "cold", "c")), withSink(sink),
					WithInstanceID("i1")}, tt.opts...)...)
				get(t, c, "cold") // not hot: never in an effect report
				tt.run(t, c)
				c.Close() // the last report
				got := sink.effect("k")
				if strings.HasPrefix(tt.name, "sampled") {
					if got.SourceLoads%4 != 0 || got.SourceLoads < 200 || got.SourceLoads > 600 || got.L1Hits != 0 || got.Limited != 0 {
						t.Errorf("effect %+v, want source loads a multiple of 4 near %d and nothing else", got, tt.want.SourceLoads)
					}
					return
				}
				if got != tt.want {
					t.Errorf("effect %+v, want %+v", got, tt.want)
				}
				sink.mu.Lock()
				defer sink.mu.Unlock()
				if _, ok := sink.effects["cold"]; ok || len(sink.effects) != 1 {
					t.Errorf("effect reported for %v, want only k", sink.effects)
				}
				if !sink.srcs["i1"] || len(sink.srcs) != 1 {
					t.Errorf("sources %v, want only i1", sink.srcs)
				}
			})
		})
	}
}

// TestEffectPathsRedis checks the effect of Gets that L1 does not answer
// against a Redis server of the test's own: a Redis hit is an L2 read, a
// Redis miss an L2 read and a source load. A promoted key's Gets are L1 hits.
func TestEffectPathsRedis(t *testing.T) {
	r := stacktest.StartRedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	if err := rdb.Set(context.Background(), "inredis", "r", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	sink := newMemSink()
	c := newClient(t, WithRedis(r.Addr), WithLoader(newSource("l1", "1")), withSink(sink))
	promote(t, c, "l1")
	for range 50 {
		get(t, c, "l1")
	}
	hotWithoutValue(c, "inredis")
	for range 3 {
		if got := get(t, c, "inredis"); got != "r" {
			t.Fatalf("Get(inredis) = %q, want r", got)
		}
	}
	hotWithoutValue(c, "nowhere")
	for range 3 {
		if _, err := c.Get(context.Background(), "nowhere"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(nowhere) = %v, want ErrNotFound", err)
		}
	}
	c.Close()
	for key, want := range map[string]wire.EffectCounts{
		"l1":      {L1Hits: 50},
		"inredis": {L2Reads: 3},
		"nowhere": {L2Reads: 3, SourceLoads: 3},
	} {
		if got := sink.effect(key); got != want {
			t.Errorf("%s: effect %+v, want %+v", key, got, want)
		}
	}
	for i, want := range []float64{50, 6, 3, 0} {
		if got := testCounter(t, c.m.effect[i]); got != want {
			t.Errorf("effect counter %d = %v, want %v", i, got, want)
		}
	}
}

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		tr   fetchTrace
		want effectOutcome
	}{
		{fetchTrace{}, 0},                // failed before any backend
		{fetchTrace{redis: true}, effL2}, // Redis hit (or error, no Loader)
		{fetchTrace{redis: true, loader: true}, effL2 | effSource},
		{fetchTrace{redis: true, limited: true}, effL2}, // Redis miss, Loader bucket empty: it did read Redis
		{fetchTrace{loader: true}, effSource},           // no Redis read
		{fetchTrace{limited: true}, effLimited},         // no Redis read, Loader bucket empty
	}
	for _, tt := range tests {
		if got := outcomeOf(tt.tr); got != tt.want {
			t.Errorf("outcomeOf(%+v) = %b, want %b", tt.tr, got, tt.want)
		}
	}
}

// TestEffectAccCarry drains a miss whose read is not counted yet: the L1
// hits are one short (reported as 0, not as a huge number) until the read
// arrives, and then right.
func TestEffectAccCarry(t *testing.T) {
	e := &hotEntry{key: "k"}
	e.eff.add(effL2, 1) // a Get counted its miss, not yet its read
	n, _ := e.hits.take()
	e.accumulate(n)
	if got, _ := e.takeEffect(); got != (wire.EffectCounts{L2Reads: 1}) {
		t.Fatalf("first report %+v, want the L2 read alone", got)
	}
	e.hits.add(1, 0) // its read
	for range 5 {
		e.hits.add(1, 0) // 5 L1 hits
	}
	n, _ = e.hits.take()
	e.accumulate(n)
	if got, _ := e.takeEffect(); got != (wire.EffectCounts{L1Hits: 5}) {
		t.Errorf("second report %+v, want 5 L1 hits", got)
	}
	if got, ok := e.takeEffect(); ok {
		t.Errorf("third report %+v, want none", got)
	}
}

// TestEffectInterval checks that effect batches come every effect interval
// with the period they cover, and none while nothing is counted.
func TestEffectInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newMemSink()
		c := newClient(t, WithLoader(newSource("k", "v")), withSink(sink), WithEffectReports(time.Second))
		promote(t, c, "k")
		time.Sleep(2 * time.Second) // the first period: nothing counted, nothing sent
		synctest.Wait()
		if got := sink.effect("k"); got != (wire.EffectCounts{}) {
			t.Fatalf("effect %+v before any Get, want none", got)
		}
		for range 10 {
			get(t, c, "k")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := sink.effect("k"); got != (wire.EffectCounts{L1Hits: 10}) {
			t.Errorf("effect %+v after one interval, want 10 L1 hits", got)
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.periods) != 1 || sink.periods[0] != 1000 {
			t.Errorf("effect periods %v ms, want [1000]", sink.periods)
		}
		if sink.versions[4] != 1 {
			t.Errorf("records by version %v, want one effect batch (4)", sink.versions)
		}
	})
}

// TestEffectBatches checks that a large hot set's effect is split into
// records of at most maxRecord bytes that carry every key, and that a
// refused record is dropped and counted.
func TestEffectBatches(t *testing.T) {
	c := newClient(t)
	effects := make([]wire.Effect, 600)
	for i := range effects {
		effects[i] = wire.Effect{Key: fmt.Sprintf("%0999d", i), EffectCounts: wire.EffectCounts{L1Hits: 2, Limited: 1}}
	}
	newRep := func(s sink) *reporter {
		return &reporter{app: "shop", src: "i1", m: c.m, sink: s, lastEffect: time.Now().Add(-5 * time.Second),
			effects: func(dst []wire.Effect) []wire.Effect { return append(dst, effects...) }}
	}
	sink := newMemSink()
	newRep(sink).flushEffects(context.Background(), time.Now())
	sink.mu.Lock()
	if sink.records < 3 || sink.versions[4] != sink.records || len(sink.effects) != len(effects) {
		t.Errorf("%d records (by version %v) for %d keys of 1 KB, %d keys decoded; want at least 3 effect batches with every key",
			sink.records, sink.versions, len(effects), len(sink.effects))
	}
	sink.mu.Unlock()

	newRep(&memSink{fail: errBacklog}).flushEffects(context.Background(), time.Now())
	if got := testCounter(t, c.m.effectDropped); got != float64(len(effects)) {
		t.Errorf("dropped effects = %v, want %d", got, len(effects))
	}
}
