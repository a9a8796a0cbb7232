package hotcache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/hotcache/bloomfilter"
	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
)

// source is a fake source of truth that counts its reads.
type source struct {
	mu    sync.Mutex // guards data and fail
	data  map[string][]byte
	fail  error
	loads atomic.Int64
	delay time.Duration
}

func newSource(kv ...string) *source {
	s := &source{data: map[string][]byte{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.data[kv[i]] = []byte(kv[i+1])
	}
	return s
}

func (s *source) Load(ctx context.Context, key string) ([]byte, error) {
	s.loads.Add(1)
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	v, ok := s.data[key]
	if !ok {
		return nil, fmt.Errorf("no %q: %w", key, ErrNotFound)
	}
	return v, nil
}

func (s *source) Write(ctx context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[key] = value
	return nil
}

func (s *source) Delete(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.data, key)
	return nil
}

func (s *source) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

func newClient(t testing.TB, opts ...Option) *Client {
	t.Helper()
	c, err := New(context.Background(), append([]Option{WithApp("shop")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func get(t testing.TB, c *Client, key string) string {
	t.Helper()
	v, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return string(v)
}

// TestPromotedKeysServedFromL1 promotes more keys than ristretto would admit
// at once and checks each is served from L1 with the source down.
func TestPromotedKeysServedFromL1(t *testing.T) {
	src := newSource()
	var keys []string
	for i := range 2000 {
		k := fmt.Sprintf("item:%d", i)
		src.data[k] = []byte("v" + k)
		keys = append(keys, k)
	}
	c := newClient(t, WithLoader(src), WithHotReadLimit(NoLimit), WithLoaderLimit(NoLimit))
	promote(t, c, keys...)
	src.setFail(errors.New("source down"))
	before := src.loads.Load()
	for _, k := range keys {
		if !c.IsHot(k) {
			t.Fatalf("IsHot(%q) = false after promotion", k)
		}
		if got, want := get(t, c, k), "v"+k; got != want {
			t.Fatalf("Get(%q) = %q, want %q", k, got, want)
		}
	}
	if n := src.loads.Load() - before; n != 0 {
		t.Errorf("%d source reads for promoted keys, want 0", n)
	}
}

func TestDemotionLeavesL1(t *testing.T) {
	src := newSource("a", "1")
	c := newClient(t, WithLoader(src))
	promote(t, c, "a")
	c.onChange(hotwatch.Change{App: "shop", Removed: []string{"a"}, At: time.Now()})
	if c.IsHot("a") {
		t.Fatal("IsHot after demotion")
	}
	before := src.loads.Load()
	get(t, c, "a")
	if got := src.loads.Load() - before; got != 1 {
		t.Errorf("source reads after demotion = %d, want 1 (no L1)", got)
	}
	c.onChange(hotwatch.Change{App: "other", Added: nil, Removed: []string{"b"}})
}

func TestL1BudgetRefusesPromotion(t *testing.T) {
	src := newSource("small", "x", "big", string(make([]byte, 4096)))
	c := newClient(t, WithLoader(src), WithL1(2048, 0))
	promote(t, c, "small")
	c.onChange(hotwatch.Change{App: "shop", Added: hotKeys("big"), At: time.Now()})
	for c.IsHot("big") {
		time.Sleep(time.Millisecond)
	}
	if !c.IsHot("small") {
		t.Error("refusing one promotion demoted another key")
	}
}

func TestHotThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource("k", "v1")
		c := newClient(t, WithLoader(src), WithHotReadLimit(1), WithL1(0, 10*time.Second))
		promote(t, c, "k") // the load takes the single token
		// Not yet stale: served from L1 without a token.
		if got := get(t, c, "k"); got != "v1" {
			t.Fatalf("Get = %q, want v1", got)
		}
		// Invalidated: no value to fall back on, no token: ErrThrottled at once.
		c.dropLocal("k")
		synctest.Wait()
		if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrThrottled) {
			t.Fatalf("Get with no token and no value: err = %v, want ErrThrottled", err)
		}
		// A second later the bucket has a token: reloaded.
		time.Sleep(time.Second)
		if got := get(t, c, "k"); got != "v1" {
			t.Fatalf("Get after refill = %q, want v1", got)
		}
	})
}

func TestRefreshAheadAndStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource("k", "v1")
		c := newClient(t, WithLoader(src), WithL1(0, 10*time.Second))
		promote(t, c, "k")
		loads := src.loads.Load()
		src.mu.Lock()
		src.data["k"] = []byte("v2")
		src.mu.Unlock()
		time.Sleep(8 * time.Second) // past 75% of the TTL: refreshed before it expires
		synctest.Wait()
		if got := src.loads.Load() - loads; got != 1 {
			t.Errorf("refreshes in 8 s = %d, want 1", got)
		}
		if got := get(t, c, "k"); got != "v2" {
			t.Errorf("after refresh Get = %q, want v2", got)
		}
		src.setFail(errors.New("source down"))
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if v := c.hot.Load().m["k"].val.Load(); v == nil || !v.stale {
			t.Fatalf("value past TTL with failing refreshes: %+v, want stale", v)
		}
		if got := get(t, c, "k"); got != "v2" {
			t.Errorf("stale Get = %q, want v2 (a hot key outlives its backends)", got)
		}
	})
}

func TestColdPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource("a", "1")
		src.delay = 10 * time.Millisecond
		f := bloom.NewWithEstimates(1000, 0.01)
		f.AddString("a")
		f.AddString("gone")
		c := newClient(t, WithLoader(src), WithBloomFilter(bloomfilter.Wrap(f)), WithNotFoundTTL(30*time.Second))

		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() { get(t, c, "a") })
		}
		wg.Wait()
		if got := src.loads.Load(); got != 1 {
			t.Errorf("50 concurrent Gets: %d loads, want 1 (single flight)", got)
		}

		tests := []struct {
			name      string
			key       string
			wantLoads int64
		}{
			{"ruled out by the Bloom filter", "never", 0},
			{"not found, loaded once", "gone", 1},
			{"not found, cached", "gone", 0},
		}
		for _, tt := range tests {
			before := src.loads.Load()
			_, err := c.Get(context.Background(), tt.key)
			c.recent.Wait()
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: err = %v, want ErrNotFound", tt.name, err)
			}
			if got := src.loads.Load() - before; got != tt.wantLoads {
				t.Errorf("%s: %d loads, want %d", tt.name, got, tt.wantLoads)
			}
		}
		time.Sleep(31 * time.Second)
		before := src.loads.Load()
		c.Get(context.Background(), "gone")
		if got := src.loads.Load() - before; got != 1 {
			t.Errorf("after the not-found TTL: %d loads, want 1", got)
		}
	})
}

func TestLoaderLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource("a", "1", "b", "2")
		c := newClient(t, WithLoader(src), WithLoaderLimit(1))
		get(t, c, "a")
		if _, err := c.Get(context.Background(), "b"); !errors.Is(err, ErrThrottled) {
			t.Fatalf("second load within a second: err = %v, want ErrThrottled", err)
		}
	})
}

func TestSetDeleteAndClose(t *testing.T) {
	src := newSource("k", "v1")
	c := newClient(t, WithLoader(src))
	promote(t, c, "k")
	if err := c.Set(context.Background(), "k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "k"); got != "v2" {
		t.Errorf("Get after Set = %q, want v2", got)
	}
	if err := c.Delete(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: err = %v, want ErrNotFound", err)
	}
	ro := newClient(t, WithLoader(LoaderFunc(src.Load)))
	if err := ro.Set(context.Background(), "k", nil); err == nil {
		t.Error("Set without a Writer = nil, want an error")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if err := c.Set(context.Background(), "k", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Set after Close: %v, want ErrClosed", err)
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
	}{
		{"no app", nil},
		{"zero not-found TTL", []Option{WithApp("a"), WithNotFoundTTL(0)}},
		{"negative Redis TTL", []Option{WithApp("a"), WithRedisTTL(-time.Second)}},
		{"two Redis", []Option{WithApp("a"), WithRedis("127.0.0.1:1"), WithRedisClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))}},
		{"zero Loader limit", []Option{WithApp("a"), WithLoaderLimit(0)}},
		{"negative hot-read limit", []Option{WithApp("a"), WithHotReadLimit(-1)}},
		{"zero local limit", []Option{WithApp("a"), WithLocalProtection(0, time.Second)}},
		{"zero local TTL", []Option{WithApp("a"), WithLocalProtection(400, 0)}},
		{"zero warm limit", []Option{WithApp("a"), WithWarmLimit(0)}},
		{"zero bulk limit", []Option{WithApp("a"), WithBulkLimit(0)}},
		{"empty retry queue", []Option{WithApp("a"), WithInvalidationQueue(0)}},
		{"negative breaker", []Option{WithApp("a"), WithBreaker(Breaker{Failures: -1})}},
	}
	for _, tt := range tests {
		if c, err := New(context.Background(), tt.opts...); err == nil {
			c.Close()
			t.Errorf("%s: New = nil error, want one", tt.name)
		}
	}
}

func ruleIndex(i int) *int { return &i }

// TestWriteKeyNeverCached checks that a key published with kind "write" is
// never served from L1 (every read reaches the Loader) while it is still
// reported, that a cached key turning into a write key leaves L1 at once,
// and that it is cached again when it turns back.
func TestWriteKeyNeverCached(t *testing.T) {
	synctest.Test(t, testWriteKeyNeverCached)
}

func testWriteKeyNeverCached(t *testing.T) {
	src := newSource("w", "v1", "c", "v2")
	sink := newMemSink()
	c := newClient(t, WithLoader(src), withSink(sink), WithLocalProtection(NoLimit, time.Second))
	ctx := context.Background()
	change := func(added, changed []hotset.Key) {
		c.onChange(hotwatch.Change{App: "shop", Added: added, Changed: changed, At: time.Now()})
	}
	loadsOf := func(key string, reads int) int64 {
		before := src.loads.Load()
		for range reads {
			get(t, c, key)
		}
		return src.loads.Load() - before
	}

	change([]hotset.Key{{Key: "w", Rate: 50, Rule: ruleIndex(2), Kind: "write"}}, nil)
	if c.IsHot("w") {
		t.Error("IsHot(write key) = true, want false")
	}
	if got := loadsOf("w", 10); got != 10 {
		t.Errorf("10 reads of a write key: %d loads, want 10 (never from L1)", got)
	}
	if err := c.Set(ctx, "w", []byte("v3")); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "w"); got != "v3" {
		t.Errorf("Get after Set = %q, want v3", got)
	}

	promote(t, c, "c")
	if got := loadsOf("c", 10); got != 0 {
		t.Errorf("10 reads of a count key in L1: %d loads, want 0", got)
	}
	// The count key turns into a write key: out of L1 at once.
	e := c.hot.Load().m["c"]
	change(nil, []hotset.Key{{Key: "c", Rate: 50, Rule: ruleIndex(0), Kind: "write"}})
	if c.IsHot("c") || e.val.Load() != nil {
		t.Errorf("after count -> write: IsHot %v, value in L1 %v; want false, none", c.IsHot("c"), e.val.Load() != nil)
	}
	if got := loadsOf("c", 5); got != 5 {
		t.Errorf("5 reads after count -> write: %d loads, want 5", got)
	}
	// And back: cached again.
	change(nil, []hotset.Key{{Key: "c", Rate: 50, Rule: ruleIndex(0), Kind: "bytes"}})
	if !c.IsHot("c") {
		t.Error("after write -> bytes: IsHot false, want true")
	}

	// Every read was reported, L1 or not, and the write.
	time.Sleep(100 * time.Millisecond) // one report interval
	synctest.Wait()
	if got, want := sink.tally("w"), (tally{reads: 11, readBytes: 10*2 + 2, writes: 1, writeBytes: 2}); got != want {
		t.Errorf("reported w %+v, want %+v", got, want)
	}
	if got := sink.tally("c"); got.reads != 15 || got.readBytes != 30 {
		t.Errorf("reported c %+v, want 15 reads of 2 bytes", got)
	}
}

func TestHotKeysCarryRuleAndKind(t *testing.T) {
	tests := []struct {
		in       hotset.Key
		wantRule int
		wantKind string
	}{
		{hotset.Key{Key: "a", Rule: ruleIndex(3), Kind: "bytes"}, 3, "bytes"},
		{hotset.Key{Key: "b", Rule: ruleIndex(-1), Kind: "count"}, -1, "count"},
		{hotset.Key{Key: "c"}, -1, "count"},
		{hotset.Key{Key: "d", Rule: ruleIndex(0), Kind: "write"}, 0, "write"},
	}
	for _, tt := range tests {
		h := hotKeyOf(tt.in)
		if h.Rule != tt.wantRule || h.Kind != tt.wantKind {
			t.Errorf("hotKeyOf(%+v) = rule %d kind %q, want %d %q", tt.in, h.Rule, h.Kind, tt.wantRule, tt.wantKind)
		}
	}
}

// TestPromotionJoinsAColdReadInFlight promotes a key while a cold read of it
// waits on the source: the promotion's load takes that read's value instead
// of calling the source a second time.
func TestPromotionJoinsAColdReadInFlight(t *testing.T) {
	src := newSource("k", "v")
	src.delay = 200 * time.Millisecond
	c := newClient(t, WithLoader(src), WithHotReadLimit(NoLimit), WithLoaderLimit(NoLimit))
	done := make(chan string)
	go func() {
		v, _ := c.Get(context.Background(), "k")
		done <- string(v)
	}()
	for src.loads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	promote(t, c, "k")
	if v := <-done; v != "v" {
		t.Fatalf("cold Get = %q, want %q", v, "v")
	}
	if got := get(t, c, "k"); got != "v" {
		t.Fatalf("hot Get = %q, want %q", got, "v")
	}
	if n := src.loads.Load(); n != 1 {
		t.Errorf("source read %d times, want 1", n)
	}
}

// TestPromotionDoesNotJoinAnInvalidatedColdRead writes the key while a cold
// read of it is in flight and promotes it: the old value the read holds must
// not become the hot value.
func TestPromotionDoesNotJoinAnInvalidatedColdRead(t *testing.T) {
	src := &firstReadSlow{source: newSource("k", "old")}
	c := newClient(t, WithLoader(src), WithHotReadLimit(NoLimit), WithLoaderLimit(NoLimit))
	done := make(chan struct{})
	go func() {
		_, _ = c.Get(context.Background(), "k")
		close(done)
	}()
	for src.loads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Set(context.Background(), "k", []byte("new")); err != nil {
		t.Fatal(err)
	}
	promote(t, c, "k")
	<-done
	if got := get(t, c, "k"); got != "new" {
		t.Errorf("hot Get after the write = %q, want %q", got, "new")
	}
}

// firstReadSlow is a source whose first read takes the value as it is when
// the read starts and returns it 200 ms later.
type firstReadSlow struct{ *source }

func (s *firstReadSlow) Load(ctx context.Context, key string) ([]byte, error) {
	first := s.loads.Load() == 0
	v, err := s.source.Load(ctx, key)
	if first {
		time.Sleep(200 * time.Millisecond)
	}
	return v, err
}

// TestInvalidatedDuringItsLoad drops a hot key while its promotion load waits
// on the source: that load's value is not installed, and the key is loaded
// again at once, not at the refresher's next tick (250 ms). Five keys in a
// row: by chance alone a tick would come within 50 ms for all five about
// once in 3,000 runs.
func TestInvalidatedDuringItsLoad(t *testing.T) {
	src := newSource("k0", "v", "k1", "v", "k2", "v", "k3", "v", "k4", "v")
	src.delay = 30 * time.Millisecond
	c := newClient(t, WithLoader(src), WithHotReadLimit(NoLimit), WithLoaderLimit(NoLimit), WithL1(0, time.Hour))
	for i := range 5 {
		k := fmt.Sprint("k", i)
		before := src.loads.Load()
		c.onChange(hotwatch.Change{App: c.o.app, Added: hotKeys(k), At: time.Now()})
		for src.loads.Load() == before {
			time.Sleep(time.Millisecond)
		}
		c.dropLocal(k) // as an invalidation would, mid-load
		dropped := time.Now()
		waitFor(t, "the value in L1", func() bool { return c.hot.Load().m[k].val.Load() != nil })
		if d := time.Since(dropped); d > 30*time.Millisecond+50*time.Millisecond {
			t.Errorf("%s in L1 %v after its drop mid-load, want one more load (30 ms), not the refresher's tick", k, d)
		}
		if n := src.loads.Load() - before; n != 2 {
			t.Errorf("%s: source read %d times, want 2 (the dropped load and its redo)", k, n)
		}
	}
}

// TestMarkedStaleDuringItsLoad: invalidations may have been missed (a lost
// subscription) while a hot key's load was in flight. That load may have
// read before them: it installs nothing, and the key is loaded again.
func TestMarkedStaleDuringItsLoad(t *testing.T) {
	src := newSource("k", "v")
	src.delay = 30 * time.Millisecond
	c := newClient(t, WithLoader(src), WithHotReadLimit(NoLimit), WithLoaderLimit(NoLimit), WithL1(0, time.Hour))
	c.onChange(hotwatch.Change{App: c.o.app, Added: hotKeys("k"), At: time.Now()})
	for src.loads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	c.markAllStale()
	waitFor(t, "a second load", func() bool { return src.loads.Load() == 2 })
	waitFor(t, "the value in L1", func() bool { return c.hot.Load().m["k"].val.Load() != nil })
}
