package aggregator

import (
	"fmt"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
)

// t0 is a bucket-aligned start time for tests that drive the table directly.
var t0 = time.Unix(1_700_000_000, 0)

func testTable(t *testing.T, mod func(*Config)) (*table, Config) {
	t.Helper()
	c := Config{ID: "s1", Addr: "127.0.0.1:1"}
	if mod != nil {
		mod(&c)
	}
	c, err := c.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return newTable(newParams(c), newMetrics(nil)), c
}

func (tb *table) addS(app, key string, n uint64, now time.Time) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.setReach(now)
	return tb.add([]byte(app), []byte(key), tally{n: n}, now, span{buckets: 1})
}

func TestWindow(t *testing.T) {
	tests := []struct {
		name string
		adds [][2]int64 // bucket, count
		to   int64
		want uint64
	}{
		{"one bucket", [][2]int64{{10, 5}}, 10, 5},
		{"within window", [][2]int64{{10, 5}, {15, 7}, {19, 1}}, 19, 13},
		{"oldest slides out", [][2]int64{{10, 5}, {15, 7}, {19, 1}}, 20, 8},
		{"all slide out", [][2]int64{{10, 5}, {15, 7}}, 25, 0},
		{"long gap", [][2]int64{{10, 5}}, 1000, 0},
		{"same bucket adds up", [][2]int64{{10, 5}, {10, 6}}, 12, 11},
		{"late add lands in newest bucket", [][2]int64{{15, 5}, {12, 6}}, 15, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindow(10, tt.adds[0][0])
			for _, a := range tt.adds {
				w.add(a[0], uint64(a[1]))
			}
			w.advance(tt.to)
			var total uint64
			for _, c := range w.b {
				total += c
			}
			if w.sum != tt.want || total != tt.want {
				t.Errorf("sum = %d (buckets %d), want %d", w.sum, total, tt.want)
			}
		})
	}
}

// drive feeds one key rates[i] accesses per second during step i (one
// bucket each, sent as one partial per bucket) and sweeps after each step. It
// returns the hot state after each step.
func drive(tb *table, c Config, start time.Time, rates []float64) []bool {
	var hot []bool
	now := start
	for _, r := range rates {
		if n := uint64(r * c.Bucket.Seconds()); n > 0 {
			tb.addS("app", "k", n, now)
		}
		now = now.Add(c.Bucket)
		tb.sweep(now.Add(-time.Nanosecond)) // end of the step's bucket
		e := tb.apps["app"]
		hot = append(hot, e != nil && e.hot["k"] != nil)
	}
	return hot
}

func repeat(r float64, n int) []float64 { return slices.Repeat([]float64{r}, n) }

// flips returns the steps at which the hot state changes.
func flips(hot []bool) []int {
	var at []int
	for i := 1; i < len(hot); i++ {
		if hot[i] != hot[i-1] {
			at = append(at, i)
		}
	}
	return at
}

func TestRuleHysteresis(t *testing.T) {
	// Defaults: threshold 1000/s, low mark 800/s, hold 2s, 1s window of 10 buckets.
	jitter := make([]float64, 100)
	for i := range jitter {
		jitter[i] = 1000 + 150*float64(1-2*(i%2)) // 1150, 850, 1150, ...: straddles the threshold
	}
	tests := []struct {
		name  string
		rates []float64
		flips []int // steps at which the hot state changes
		hot   bool  // state at the end
	}{
		{"below threshold never hot", repeat(990, 60), nil, false},
		// The window holds 10 buckets of 100 each after step 9.
		{"at threshold turns hot once and does not flap", repeat(1000, 100), []int{9}, true},
		{"straddling the threshold does not flap", jitter, []int{9}, true},
		{"between low mark and threshold stays hot",
			slices.Concat(repeat(2000, 10), repeat(850, 100)), []int{4}, true},
		// After the stop the window falls below 800/s at step 16 (seven empty
		// buckets); the hold runs 2 s = 20 steps from there.
		{"stop demotes after the hold",
			slices.Concat(repeat(2000, 10), repeat(0, 40)), []int{4, 36}, false},
		{"dip shorter than the hold keeps it hot",
			slices.Concat(repeat(2000, 10), repeat(0, 15), repeat(2000, 30)), []int{4}, true},
		{"hold restarts after a recovery",
			slices.Concat(repeat(2000, 10), repeat(0, 15), repeat(2000, 10), repeat(0, 40)), []int{4, 61}, false},
		{"hot again after demotion",
			slices.Concat(repeat(2000, 10), repeat(0, 40), repeat(2000, 10)), []int{4, 36, 54}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, c := testTable(t, nil)
			hot := drive(tb, c, t0, tt.rates)
			if got := flips(hot); !slices.Equal(got, tt.flips) || hot[len(hot)-1] != tt.hot {
				t.Errorf("flips at %v, final hot %v; want %v, %v", got, hot[len(hot)-1], tt.flips, tt.hot)
			}
		})
	}
}

func TestRuleCustomMarks(t *testing.T) {
	tests := []struct {
		name  string
		mod   func(*Config)
		rates []float64
		flips []int
	}{
		{"threshold 100 over 2s window", func(c *Config) { c.Threshold = 100; c.Window = 2 * time.Second },
			repeat(100, 30), []int{19}},
		{"low mark equal to threshold demotes below it after hold",
			func(c *Config) { c.LowMark = 1000; c.Hold = 500 * time.Millisecond },
			slices.Concat(repeat(1000, 20), repeat(900, 20)), []int{9, 25}},
		{"tiny hold demotes on the second sweep below the low mark",
			func(c *Config) { c.Hold = time.Nanosecond }, slices.Concat(repeat(2000, 10), repeat(0, 40)), []int{4, 17}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, c := testTable(t, tt.mod)
			if got := flips(drive(tb, c, t0, tt.rates)); !slices.Equal(got, tt.flips) {
				t.Errorf("flips at %v, want %v", got, tt.flips)
			}
		})
	}
}

func TestPromotionRecordsCrossingBucket(t *testing.T) {
	tb, _ := testTable(t, nil)
	at := t0.Add(350 * time.Millisecond)
	if tb.addS("app", "k", 999, t0) {
		t.Fatal("999 accesses in the window promoted the key")
	}
	if !tb.addS("app", "k", 1, at) {
		t.Fatal("1000 accesses within the window did not promote the key")
	}
	as := tb.apps["app"]
	if want := t0.Add(300 * time.Millisecond); len(as.pending) != 1 || !as.pending[0].Equal(want) {
		t.Errorf("pending = %v, want [%v]", as.pending, want)
	}
	if !as.dirty {
		t.Error("app not dirty after a promotion")
	}
	st, ok := tb.key("app", "k", at)
	if !ok || !st.Hot || !st.Since.Equal(at) || st.Rate != 1000 {
		t.Errorf("key = %+v, %v; want hot since %v at 1000/s", st, ok, at)
	}
}

func TestTopK(t *testing.T) {
	tb, _ := testTable(t, func(c *Config) { c.TopK = 3 })
	rates := map[string]uint64{"a": 50, "b": 5000, "c": 10, "d": 700, "e": 300, "f": 1}
	for k, n := range rates {
		tb.addS("app", k, n, t0)
	}
	tb.addS("other", "x", 20, t0)
	tb.sweep(t0)
	tests := []struct {
		app  string
		n    int
		want []string
	}{
		{"app", 3, []string{"b:5000:true", "d:700:false", "e:300:false"}},
		{"app", 2, []string{"b:5000:true", "d:700:false"}},
		{"app", 10, []string{"b:5000:true", "d:700:false", "e:300:false"}}, // capped at TopK
		{"other", 3, []string{"x:20:false"}},
		{"none", 3, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, s := range tb.top(tt.app, tt.n, t0) {
			got = append(got, fmt.Sprintf("%s:%v:%v", s.Key, s.Rate, s.Hot))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("top(%q, %d) = %v, want %v", tt.app, tt.n, got, tt.want)
		}
	}
}

func TestTopKHeapMatchesSort(t *testing.T) {
	tb, _ := testTable(t, func(c *Config) { c.TopK = 7 })
	var all []float64
	for i := range 200 {
		n := uint64((i * 7919) % 997) // distinct-ish pseudo-random counts
		tb.addS("app", fmt.Sprint("k", i), n+1, t0)
		all = append(all, float64(n+1))
	}
	tb.sweep(t0)
	slices.SortFunc(all, func(x, y float64) int { return int(y - x) })
	var got []float64
	for _, s := range tb.top("app", 7, t0) {
		got = append(got, s.Rate)
	}
	if !slices.Equal(got, all[:7]) {
		t.Errorf("top 7 rates = %v, want %v", got, all[:7])
	}
}

func TestBoundedKeys(t *testing.T) {
	tb, _ := testTable(t, func(c *Config) { c.MaxKeys = 4 })
	tb.addS("app", "hot", 5000, t0)
	for i := range 3 {
		tb.addS("app", fmt.Sprint("warm", i), 100, t0)
	}
	// Full: a newcomer colder than every sampled key is refused.
	tb.addS("app", "cold", 1, t0)
	if _, ok := tb.key("app", "cold", t0); ok {
		t.Error("a newcomer colder than all tracked keys was admitted")
	}
	// A busier newcomer evicts a warm key, never the hot one.
	for i := range 20 {
		tb.addS("app", fmt.Sprint("busy", i), uint64(200+i), t0)
		if n := len(tb.entries); n > 4 {
			t.Fatalf("tracked %d keys, cap 4", n)
		}
		if _, ok := tb.key("app", "hot", t0); !ok {
			t.Fatal("the hot key was evicted")
		}
	}
	if n := len(tb.apps["app"].keys); n != 4 {
		t.Errorf("app tracks %d keys, want 4", n)
	}
	// Idle keys go at the sweep after their window empties; the hot one stays.
	tb.sweep(t0.Add(1100 * time.Millisecond))
	if n := len(tb.entries); n != 1 {
		t.Errorf("after idle sweep tracked %d keys, want 1 (the hot key)", n)
	}
	for i, e := range tb.entries {
		if e.idx != i {
			t.Errorf("entries[%d].idx = %d", i, e.idx)
		}
	}
}

func TestRestoreHoldsUntilConfirmedOrHoldRunsOut(t *testing.T) {
	node := &hotset.Shard{App: "app", Shard: "s1", Updated: t0.UnixMilli(), TTL: 10000, Keys: []hotset.Key{
		{Key: "confirmed", Rate: 5000, Since: t0.Add(-time.Minute).UnixMilli()},
		{Key: "gone", Rate: 3000, Since: t0.Add(-time.Minute).UnixMilli()},
		{Key: "pinned", Rate: 1, Source: "pinned"},
	}}
	tb, c := testTable(t, nil)
	if n := tb.restore(node, t0); n != 2 {
		t.Fatalf("restored %d keys, want 2", n)
	}
	st, _ := tb.key("app", "gone", t0)
	if !st.Hot || st.Rate != 3000 || !st.Since.Equal(time.UnixMilli(node.Keys[1].Since)) {
		t.Errorf("restored key = %+v, want hot at its published rate and since", st)
	}
	var goneCold time.Duration
	for now := t0; now.Before(t0.Add(5 * time.Second)); now = now.Add(c.Bucket) {
		tb.addS("app", "confirmed", 500, now)
		tb.sweep(now)
		if st, _ := tb.key("app", "gone", now); !st.Hot && goneCold == 0 {
			goneCold = now.Sub(t0)
		}
	}
	if st, _ := tb.key("app", "confirmed", t0.Add(5*time.Second)); !st.Hot {
		t.Error("key confirmed by the live stream went cold")
	}
	// One window of grace, then the hold.
	if want := c.Window + c.Hold; goneCold != want {
		t.Errorf("unconfirmed restored key went cold after %v, want %v", goneCold, want)
	}
}

func TestFitTrimsToMaxBytes(t *testing.T) {
	big := string(slices.Repeat([]byte("k"), 1000))
	s := &hotset.Shard{App: "app", Shard: "s1", TTL: 10000}
	for i := range 2000 {
		s.Keys = append(s.Keys, hotset.Key{Key: fmt.Sprint(i, big), Rate: float64(5000 - i)})
	}
	if err := fit(s); err != nil {
		t.Fatal(err)
	}
	b, err := hotset.Encode(s)
	if err != nil {
		t.Fatalf("encode after fit: %v", err)
	}
	if len(s.Keys) < 800 || s.Keys[0].Rate != 5000 {
		t.Errorf("kept %d keys (%d bytes) starting at rate %v; want the busiest and >= 800", len(s.Keys), len(b), s.Keys[0].Rate)
	}
	small := &hotset.Shard{Keys: []hotset.Key{{Key: "a"}}}
	if err := fit(small); err != nil || len(small.Keys) != 1 {
		t.Errorf("small shard: %v, %d keys", err, len(small.Keys))
	}
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	c, err := Config{ID: "a", Addr: "x:1"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Threshold != 1000 || c.LowMark != 800 || c.Hold != 2*time.Second || c.Window != time.Second ||
		c.Bucket != 100*time.Millisecond || c.TTL != 10*time.Second || c.Renew != c.TTL/4 {
		t.Errorf("defaults = %+v", c)
	}
	bad := []Config{
		{Addr: "x:1"},
		{ID: "a"},
		{ID: "a", Addr: "x:1", Window: 150 * time.Millisecond},
		{ID: "a", Addr: "x:1", LowMark: 2000},
		{ID: "a", Addr: "x:1", TTL: time.Second, Renew: time.Second},
		{ID: "a", Addr: "x:1", Threshold: -1},
	}
	for _, b := range bad {
		if _, err := b.withDefaults(); err == nil {
			t.Errorf("%+v: no error", b)
		}
	}
}

// BenchmarkSweep measures one sweep tick over a full table (MaxKeys default,
// 100k keys in 10 apps, 1% hot), the work done every Bucket under the lock.
func BenchmarkSweep(b *testing.B) {
	c, err := Config{ID: "s1", Addr: "x:1"}.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	tb := newTable(newParams(c), newMetrics(nil))
	for i := range c.MaxKeys {
		n := uint64(1 + i%500)
		if i%100 == 0 {
			n = 5000
		}
		tb.addS(fmt.Sprint("app", i%10), fmt.Sprint("item:", i), n, t0)
	}
	b.ReportAllocs()
	now := t0
	for b.Loop() {
		// Stay inside the window so that no key goes idle between sweeps.
		tb.sweep(now)
	}
	if len(tb.entries) != c.MaxKeys {
		b.Fatalf("tracked %d keys, want %d", len(tb.entries), c.MaxKeys)
	}
}

func TestWindowAddSpan(t *testing.T) {
	tests := []struct {
		name        string
		span        int64
		n           uint64
		wantBuckets []uint64 // newest first
		wantCounted uint64
	}{
		{"one bucket", 1, 7, []uint64{7, 0, 0, 0}, 7},
		{"span 0 is one bucket", 0, 7, []uint64{7, 0, 0, 0}, 7},
		{"spread evenly, remainder newest", 3, 10, []uint64{4, 3, 3, 0}, 10},
		{"whole window", 4, 8, []uint64{2, 2, 2, 2}, 8},
		{"older than the window is left out", 8, 16, []uint64{2, 2, 2, 2}, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindow(4, 100)
			counted := w.addSpan(110, tt.span, tt.n)
			var got []uint64
			for i := int64(0); i < 4; i++ {
				got = append(got, w.b[(w.last-i)%4])
			}
			if counted != tt.wantCounted || w.sum != tt.wantCounted || !slices.Equal(got, tt.wantBuckets) {
				t.Errorf("addSpan(span %d, %d): buckets %v sum %d counted %d; want %v, %d",
					tt.span, tt.n, got, w.sum, counted, tt.wantBuckets, tt.wantCounted)
			}
		})
	}
}

// TestCatchUpBatchIsSpread: a key at a steady 800/s; its detector stalls
// for 400 ms, then sends those 400 ms (320 accesses) in one batch and goes
// on with a batch of 80 every 100 ms. Counted as received at once, the
// catch-up batch stays in the window for a full second beside the next
// second's counts and the key reads as 1040/s; spread over the 400 ms of
// event time it covers, it reads as 800/s.
func TestCatchUpBatchIsSpread(t *testing.T) {
	for _, tt := range []struct {
		spanMs  int64
		wantHot bool
	}{{0, true}, {100, true}, {400, false}} {
		a := mustNew(t, Config{}, &fakePub{})
		start := time.Unix(1_700_000_000, 0)
		apply := func(at time.Duration, n uint64, span int64) {
			body := wire.AppendPartials(nil, &wire.PartialBatch{Source: "d1", Span: span,
				Groups: []wire.PartialGroup{{App: "app", Entries: []wire.KeyCount{{Key: "k", Count: n}}}}})
			if _, err := a.apply(body, start.Add(at)); err != nil {
				t.Fatal(err)
			}
		}
		apply(400*time.Millisecond, 320, tt.spanMs)
		for at := 500 * time.Millisecond; at <= 1300*time.Millisecond; at += 100 * time.Millisecond {
			apply(at, 80, 100)
		}
		st, _ := a.t.key("app", "k", start.Add(1300*time.Millisecond))
		if st.Hot != tt.wantHot {
			t.Errorf("catch-up batch with span %dms: hot %v at rate %v, want hot %v", tt.spanMs, st.Hot, st.Rate, tt.wantHot)
		}
	}
}

// TestEvalWindowMatchesRecount: the evaluated sum, kept up to date as
// counts arrive, the window slides and the evaluated end moves (forward a
// bucket or a few, back, far), always equals a recount of its buckets.
func TestEvalWindowMatchesRecount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	w := newRing(22, 10, 1000)
	end := int64(995)
	for step := range 20000 {
		now := w.last + int64(rng.IntN(2))
		switch rng.IntN(4) {
		case 0:
			w.add(now, uint64(rng.IntN(100)))
		case 1:
			w.addTime(now, (now-15)*100+int64(rng.IntN(1500)), now*100+int64(rng.IntN(100)), 100, uint64(rng.IntN(1000)))
		case 2:
			w.advance(now)
		}
		switch r := rng.IntN(10); {
		case r < 6:
			end = w.last - 2 // follows the clock
		case r < 8:
			end = w.last - int64(rng.IntN(12))
		default:
			end = w.last - int64(rng.IntN(40)) // far back, partly out of the ring
		}
		got := w.evalTo(end)
		var want uint64
		size := int64(len(w.b))
		for i := max(end-9, w.last-size+1); i <= min(end, w.last); i++ {
			want += w.b[i%size]
		}
		if got != want {
			t.Fatalf("step %d: evalTo(%d) = %d, recount %d", step, end, got, want)
		}
	}
}
