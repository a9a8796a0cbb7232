package aggregator

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/rules"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// compile compiles rs against tb's default rule.
func compile(t *testing.T, tb *table, rs ...rules.Rule) *rules.Set {
	t.Helper()
	s, err := rules.Compile(&rules.List{Rules: rs}, tb.p.def)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// addT counts c for (app, key) received at now, in the newest bucket.
func (tb *table) addT(app, key string, c tally, now time.Time) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.setReach(now)
	return tb.add([]byte(app), []byte(key), c, now, span{buckets: 1})
}

func (tb *table) isHot(app, key string) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	as := tb.apps[app]
	return as != nil && as.hot[key] != nil
}

func fixed(now time.Time) func() time.Time { return func() time.Time { return now } }

func TestRuleQuantity(t *testing.T) {
	c := tally{n: 10, writes: 3, bytes: 1000, writeBytes: 400}
	tests := []struct {
		measure rules.Measure
		ops     rules.Ops
		want    uint64
	}{
		{rules.Count, rules.Read, 7},
		{rules.Count, rules.Write, 3},
		{rules.Count, rules.Any, 10},
		{rules.Bytes, rules.Read, 600},
		{rules.Bytes, rules.Write, 400},
		{rules.Bytes, rules.Any, 1000},
	}
	for _, tt := range tests {
		r := resolved{eff: rules.Effective{Measure: tt.measure, Ops: tt.ops}}
		if got := r.quantity(c); got != tt.want {
			t.Errorf("%s of %s: got %d, want %d", tt.measure, tt.ops, got, tt.want)
		}
	}
	// A tally that claims more writes than accesses never wraps.
	r := resolved{eff: rules.Effective{Measure: rules.Count, Ops: rules.Read}}
	if got := r.quantity(tally{n: 1, writes: 5}); got != 0 {
		t.Errorf("reads of 1 access and 5 writes: got %d, want 0", got)
	}
}

func TestWindowResize(t *testing.T) {
	tests := []struct {
		name       string
		size, n    int
		sum, evalN uint64 // sum of the ring, and of the n buckets ending at the newest
	}{
		{"longer keeps every bucket", 30, 20, 10, 10},
		{"shorter ring drops the oldest", 5, 5, 5, 5},
		{"shorter evaluation, same ring", 10, 3, 10, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newRing(10, 10, 100)
			for b := int64(100); b < 110; b++ {
				w.add(b, 1)
			}
			w.evalTo(109)
			w.resize(tt.size, tt.n)
			if w.sum != tt.sum {
				t.Errorf("sum = %d, want %d", w.sum, tt.sum)
			}
			if got := w.evalTo(109); got != tt.evalN {
				t.Errorf("evaluated = %d, want %d", got, tt.evalN)
			}
			w.add(110, 7) // still a working ring
			if got := w.from(110); got != 7 {
				t.Errorf("after an add: newest bucket %d, want 7", got)
			}
		})
	}
}

// TestRulesPerApp drives two apps with different rule lists for 3 s and
// checks each key's decision, rule and kind against its own rule.
func TestRulesPerApp(t *testing.T) {
	tb, c := testTable(t, nil) // default: 1000/s reads over 1 s
	tb.setRules("shop", compile(t, tb,
		rules.Rule{Match: rules.Prefix, Pattern: "item:", Threshold: 500, Window: 2 * time.Second},
		rules.Rule{Match: rules.Prefix, Pattern: "session:", Mode: rules.Never},
		rules.Rule{Match: rules.Prefix, Pattern: "blob:", Measure: rules.Bytes, Threshold: 10_000},
		rules.Rule{Match: rules.Glob, Pattern: "counter:*", Ops: rules.Write, Threshold: 50},
	), fixed(t0))
	// per second: reads+writes, writes, bytes, writeBytes
	load := []struct {
		app, key string
		per      tally
		hot      bool
		tracked  bool
		rule     int
		kind     string
	}{
		{"shop", "item:1", tally{n: 600}, true, true, 0, "count"},
		{"shop", "item:2", tally{n: 400}, false, true, 0, "count"},
		{"shop", "session:1", tally{n: 5000}, false, true, 1, "count"},
		{"shop", "blob:1", tally{n: 100, bytes: 20_000}, true, true, 2, "bytes"},
		{"shop", "blob:2", tally{n: 100, bytes: 5_000}, false, true, 2, "bytes"},
		{"shop", "counter:1", tally{n: 100, writes: 100}, true, true, 3, "write"},
		{"shop", "counter:2", tally{n: 200, writes: 20}, false, true, 3, "write"},
		{"shop", "page", tally{n: 1200}, true, true, -1, "count"},
		{"shop", "written", tally{n: 2000, writes: 2000}, false, false, 0, ""}, // the default counts reads only
		{"blog", "item:1", tally{n: 600}, false, true, -1, "count"},
		{"blog", "item:3", tally{n: 1100}, true, true, -1, "count"},
	}
	now := t0
	for range 30 {
		for _, l := range load {
			p := l.per
			tb.addT(l.app, l.key, tally{p.n / 10, p.writes / 10, p.bytes / 10, p.writeBytes / 10}, now)
		}
		now = now.Add(c.Bucket)
		tb.sweep(now.Add(-time.Nanosecond))
	}
	for _, l := range load {
		st, ok := tb.key(l.app, l.key, now.Add(-time.Nanosecond))
		if ok != l.tracked {
			t.Errorf("%s/%s tracked %v, want %v", l.app, l.key, ok, l.tracked)
			continue
		}
		if !ok {
			continue
		}
		if st.Hot != l.hot || st.Rule != l.rule || st.Kind != l.kind {
			t.Errorf("%s/%s: hot %v rule %d kind %q, want %v %d %q (rate %v)", l.app, l.key, st.Hot, st.Rule, st.Kind, l.hot, l.rule, l.kind, st.Rate)
		}
	}
	// The node carries each hot key's rule and kind, its rate in the
	// rule's measure.
	got := map[string]string{}
	for _, w := range tb.due(now, &c, true) {
		for _, k := range w.shard.Keys {
			got[w.shard.App+"/"+k.Key] = fmt.Sprintf("%d %s %.0f", *k.Rule, k.Kind, k.Rate)
		}
	}
	want := map[string]string{
		"shop/item:1": "0 count 600", "shop/blob:1": "2 bytes 20000", "shop/counter:1": "3 write 100",
		"shop/page": "-1 count 1200", "blog/item:3": "-1 count 1100",
	}
	if !maps.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
}

// TestLiveRuleChange: a lower threshold turns a key hot at once, a higher
// one turns another cold after its hold; a never rule demotes at once and
// the key is still counted.
func TestLiveRuleChange(t *testing.T) {
	tb, c := testTable(t, nil)
	keys := map[string]uint64{"a": 70, "b": 120, "s": 300} // per bucket: 700/s, 1200/s, 3000/s
	now := t0
	step := func(n int) {
		for range n {
			for k, v := range keys {
				tb.addT("app", k, tally{n: v}, now)
			}
			now = now.Add(c.Bucket)
			tb.sweep(now.Add(-time.Nanosecond))
		}
	}
	step(15)
	if tb.isHot("app", "a") || !tb.isHot("app", "b") || !tb.isHot("app", "s") {
		t.Fatalf("before the change: a %v b %v s %v, want false true true", tb.isHot("app", "a"), tb.isHot("app", "b"), tb.isHot("app", "s"))
	}
	tb.setRules("app", compile(t, tb,
		rules.Rule{Match: rules.Exact, Pattern: "a", Threshold: 500},
		rules.Rule{Match: rules.Exact, Pattern: "b", Threshold: 2000, Hold: 500 * time.Millisecond},
		rules.Rule{Match: rules.Exact, Pattern: "s", Mode: rules.Never},
	), fixed(now.Add(-time.Nanosecond)))
	if !tb.isHot("app", "a") {
		t.Errorf("a at 700/s under a 500/s rule: not hot right after the change")
	}
	if tb.isHot("app", "s") {
		t.Errorf("s under a never rule: still hot right after the change")
	}
	if !tb.isHot("app", "b") {
		t.Errorf("b: demoted before its hold")
	}
	step(6) // the hold of 500 ms runs out
	if tb.isHot("app", "b") {
		t.Errorf("b at 1200/s under a 2000/s rule: still hot after its hold")
	}
	st, ok := tb.key("app", "s", now.Add(-time.Nanosecond))
	if !ok || st.Rate != 3000 || st.Hot || st.Rule != 2 {
		t.Errorf("never key: %+v tracked %v, want counted at 3000/s, cold, rule 2", st, ok)
	}
	tb.sweep(now.Add(-time.Nanosecond))
	if top := tb.top("app", 1, now); len(top) != 1 || top[0].Key != "s" {
		t.Errorf("top = %+v, want the never key s first", top)
	}
	// Back to the defaults (rules deleted): s turns hot again at once, a
	// (700/s, under the default low mark of 800/s) after the default hold.
	tb.setRules("app", nil, fixed(now.Add(-time.Nanosecond)))
	if !tb.isHot("app", "s") || !tb.isHot("app", "a") {
		t.Errorf("right after the rules were deleted: s hot %v, a hot %v; want true, true", tb.isHot("app", "s"), tb.isHot("app", "a"))
	}
	step(21)
	if tb.isHot("app", "a") {
		t.Errorf("a at 700/s: still hot after the default hold")
	}
}

// TestRuleChangeKeepsOrDropsCounts: a window change keeps the counts still
// inside the new window; a measure or ops change starts empty.
func TestRuleChangeKeepsOrDropsCounts(t *testing.T) {
	tb, c := testTable(t, nil)
	now := t0
	for range 10 { // 100 reads and 1000 bytes per bucket for 1 s
		tb.addT("app", "k", tally{n: 100, bytes: 1000}, now)
		now = now.Add(c.Bucket)
	}
	at := now.Add(-time.Nanosecond)
	tests := []struct {
		name string
		rule rules.Rule
		rate float64
	}{
		{"longer window keeps the second it held", rules.Rule{Window: 2 * time.Second}, 500},
		{"shorter window keeps its last 500ms", rules.Rule{Window: 500 * time.Millisecond}, 1000},
		{"back to the longer window: nothing lost or doubled", rules.Rule{Window: 2 * time.Second}, 500},
		{"same quantity, other threshold: kept", rules.Rule{Window: 2 * time.Second, Threshold: 10}, 500},
		{"bytes: starts empty", rules.Rule{Measure: rules.Bytes}, 0},
		{"writes: starts empty", rules.Rule{Ops: rules.Write}, 0},
	}
	for _, tt := range tests {
		r := tt.rule
		r.Match, r.Pattern = rules.Exact, "k"
		tb.setRules("app", compile(t, tb, r), fixed(at))
		st, ok := tb.key("app", "k", at)
		if !ok || st.Rate != tt.rate {
			t.Errorf("%s: rate %v (tracked %v), want %v", tt.name, st.Rate, ok, tt.rate)
		}
	}
}

func TestCutTopK(t *testing.T) {
	ks := func(spec ...any) []KeyState { // key, rate, hot, ...
		var out []KeyState
		for i := 0; i < len(spec); i += 3 {
			out = append(out, KeyState{Key: spec[i].(string), Rate: spec[i+1].(float64), Hot: spec[i+2].(bool)})
		}
		return out
	}
	tests := []struct {
		name  string
		cands []KeyState
		k     int
		want  []string
	}{
		{"fewer than k", ks("a", 5.0, false, "b", 1.0, false), 3, []string{"a", "b"}},
		{"zero rates never enter", ks("a", 5.0, false, "b", 0.0, false), 3, []string{"a"}},
		{"first cut: the busiest", ks("a", 5.0, false, "b", 9.0, false, "c", 7.0, false), 2, []string{"b", "c"}},
		{"member within 5% of the k-th stays", ks("a", 100.0, true, "b", 103.0, false, "c", 500.0, true), 2, []string{"a", "c"}},
		{"newcomer well above the member replaces it", ks("a", 100.0, true, "b", 106.0, false, "c", 500.0, true), 2, []string{"b", "c"}},
		{"members over k: the busiest stay", ks("a", 10.0, true, "b", 10.1, true, "c", 10.2, true), 2, []string{"b", "c"}},
		{"ties break by key", ks("b", 1.0, false, "a", 1.0, false, "c", 1.0, false), 2, []string{"a", "b"}},
	}
	for _, tt := range tests {
		got := slices.Sorted(maps.Keys(cutTopK(tt.cands, tt.k)))
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// shardPeers answers RuleTop from in-process shards, as the api Client does
// over HTTP; down names shards that do not answer.
type shardPeers struct {
	mu     sync.Mutex
	shards []*Aggregator
	down   map[string]bool
}

func (p *shardPeers) RuleTop(ctx context.Context, app string, rule, n int) ([]shardapi.Top, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var tops []shardapi.Top
	var err error
	for _, a := range p.shards {
		if p.down[a.cfg.ID] {
			err = fmt.Errorf("aggregator %s: down", a.cfg.ID)
			continue
		}
		tops = append(tops, shardapi.Top{App: app, Shard: a.cfg.ID, Keys: a.RuleTop(app, rule, n)})
	}
	return tops, err
}

// TestTopKAcrossShards: three shards, each owning some keys of a top-K
// rule, reach one set of the K busiest over all of them; the set holds
// against a newcomer within 5 % and gives way to one well above; a shard
// that cannot reach a peer keeps its last view for PeerGrace.
func TestTopKAcrossShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := &shardPeers{down: map[string]bool{}}
		var shards []*Aggregator
		for i := range 3 {
			a, err := New(Config{ID: fmt.Sprint("s", i), Addr: "127.0.0.1:1", Peers: peers, PeerGrace: 2 * time.Second}, &fakePub{})
			if err != nil {
				t.Fatal(err)
			}
			shards = append(shards, a)
		}
		peers.shards = shards
		for _, a := range shards {
			a.SetRules("feed", compile(t, a.t, rules.Rule{Match: rules.Prefix, Pattern: "feed:", Mode: rules.TopK, K: 3}))
		}
		rate := map[string]uint64{"feed:0": 100, "feed:1": 200, "feed:2": 300, "feed:3": 400, "feed:4": 500, "feed:5": 600}
		owner := func(k string) *Aggregator { return shards[int(k[len(k)-1]-'0')%3] }
		// round feeds 1 s of traffic at rate, sweeps and cuts on every shard.
		round := func() {
			for range 10 {
				for k, r := range rate {
					owner(k).Add("feed", k, r/10)
				}
				time.Sleep(100 * time.Millisecond)
				for _, a := range shards {
					a.t.sweep(time.Now())
				}
			}
			for _, a := range shards {
				a.cutAll(t.Context(), map[peerViewKey]peerView{})
			}
		}
		hot := func() []string {
			var out []string
			for k := range rate {
				if owner(k).t.isHot("feed", k) {
					out = append(out, k)
				}
			}
			slices.Sort(out)
			return out
		}
		check := func(step string, want ...string) {
			t.Helper()
			if got := hot(); !slices.Equal(got, want) {
				t.Errorf("%s: hot %v, want %v", step, got, want)
			}
		}
		round()
		check("first cut", "feed:3", "feed:4", "feed:5")
		rate["feed:2"] = 410 // within 5 % of the 3rd (400): no flap
		round()
		round()
		check("newcomer within 5%", "feed:3", "feed:4", "feed:5")
		rate["feed:2"] = 440 // 10 % above
		round()
		round()
		check("newcomer well above", "feed:2", "feed:4", "feed:5")
		for _, a := range shards {
			if st, ok := a.t.key("feed", "feed:4", time.Now()); ok && (st.Rule != 0 || st.Kind != "count") {
				t.Errorf("feed:4: rule %d kind %q, want 0 count", st.Rule, st.Kind)
			}
		}

		// A shard that cannot reach s2 (owner of feed:2 and feed:5) counts
		// with its last answer: s1's feed:4 stays in the set.
		views := map[peerViewKey]peerView{}
		shards[1].cutAll(t.Context(), views)
		peers.mu.Lock()
		peers.down["s2"] = true
		peers.mu.Unlock()
		shards[1].cutAll(t.Context(), views)
		if !shards[1].t.isHot("feed", "feed:4") {
			t.Errorf("s2 unreachable: feed:4 left the set at s1; want the last view of s2 kept")
		}
		time.Sleep(3 * time.Second) // past PeerGrace: s2's view is dropped
		shards[1].cutAll(t.Context(), views)
		if _, ok := views[peerViewKey{"s2", "feed", 0}]; ok {
			t.Errorf("s2's view kept past PeerGrace")
		}
	})
}

// TestDecisionsCarryRule: a Recorder is told the rule index of each decision.
func TestDecisionsCarryRule(t *testing.T) {
	tb, c := testTable(t, func(c *Config) { c.Recorder = &fakeRecorder{} })
	tb.setRules("app", compile(t, tb, rules.Rule{Match: rules.Suffix, Pattern: ":x", Threshold: 10}), fixed(t0))
	tb.addT("app", "k:x", tally{n: 100}, t0)
	tb.addT("app", "k", tally{n: 1000}, t0)
	tb.sweep(t0.Add(c.Bucket - 1))
	got := map[string]int{}
	for _, d := range tb.takeDecided(t0) {
		got[d.Key] = d.Rule
	}
	if want := map[string]int{"k:x": 0, "k": -1}; !maps.Equal(got, want) {
		t.Errorf("decided rules %v, want %v", got, want)
	}
}

// BenchmarkSetRules re-resolves 100 000 tracked keys of one app against
// 100 rules (alternating two lists that differ in thresholds and windows),
// while another goroutine keeps adding counts: max_intake_wait_ms is the
// longest any of those adds waited for the table lock.
func BenchmarkSetRules(b *testing.B) {
	tb, _ := testTable(&testing.T{}, func(c *Config) { c.MaxKeys = 200_000 })
	now := time.Now()
	const keys, nrules = 100_000, 100
	for i := range keys {
		tb.addT("app", fmt.Sprintf("p%d:%d", i%nrules, i), tally{n: 1}, now)
	}
	lists := [2]*rules.Set{}
	for v := range lists {
		var rs []rules.Rule
		for j := range nrules {
			m := rules.Prefix
			p := fmt.Sprintf("p%d:", j)
			if j%2 == 1 {
				m, p = rules.Glob, fmt.Sprintf("p%d:*", j)
			}
			rs = append(rs, rules.Rule{Match: m, Pattern: p, Threshold: float64(100 * (j + 1 + v)),
				Window: time.Duration(1+(j+v)%20) * 100 * time.Millisecond})
		}
		var err error
		if lists[v], err = rules.Compile(&rules.List{Rules: rs}, tb.p.def); err != nil {
			b.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var maxWait time.Duration
	var slow, adds int
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			tb.addT("app", fmt.Sprintf("p%d:%d", i%nrules, i%keys), tally{n: 1}, start)
			d := time.Since(start)
			maxWait = max(maxWait, d)
			if d > 20*time.Millisecond {
				slow++
			}
			adds++
		}
	})
	// Baseline: the same adds with no rule change, for as long.
	time.Sleep(300 * time.Millisecond)
	base := maxWait
	maxWait, slow, adds = 0, 0, 0
	b.ResetTimer()
	for i := range b.N {
		tb.setRules("app", lists[i%2], time.Now)
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(maxWait.Microseconds())/1000, "max_intake_wait_ms")
	b.ReportMetric(float64(base.Microseconds())/1000, "baseline_max_wait_ms")
	b.ReportMetric(float64(len(tb.entries)), "keys")
	b.ReportMetric(float64(slow)/float64(max(adds, 1)), "adds_over_20ms/add")
}

// BenchmarkMemoryPerKey reports the heap one tracked key takes (10-byte
// keys) under a rule of each window: the ring grows by 8 bytes per 100 ms.
func BenchmarkMemoryPerKey(b *testing.B) {
	for _, w := range []time.Duration{100 * time.Millisecond, time.Second, 10 * time.Second, 60 * time.Second} {
		b.Run(w.String(), func(b *testing.B) {
			const keys = 20_000
			var per float64
			for range b.N {
				tb, _ := testTable(&testing.T{}, nil)
				tb.setRules("app", compile(&testing.T{}, tb, rules.Rule{Match: rules.Prefix, Pattern: "k", Window: w}), time.Now)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				now := time.Now()
				for i := range keys {
					tb.addT("app", fmt.Sprintf("k%09d", i), tally{n: 1}, now)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				per = float64(after.HeapAlloc-before.HeapAlloc) / keys
				runtime.KeepAlive(tb)
			}
			b.ReportMetric(per, "B/key")
		})
	}
}

func TestRuleTopMatchesSort(t *testing.T) {
	tb, _ := testTable(t, nil)
	tb.setRules("app", compile(t, tb, rules.Rule{Match: rules.Prefix, Pattern: "g", Mode: rules.TopK, K: 5}), fixed(t0))
	var want []string
	for i := range 300 {
		n := uint64((i*7919)%97 + 1) // repeats: ties break by key
		tb.addT("app", fmt.Sprintf("g%03d", i), tally{n: n}, t0)
		want = append(want, fmt.Sprintf("%02d g%03d", 97-n, i)) // sorts as the cut does
	}
	tb.addT("app", "other", tally{n: 1000}, t0)
	tb.sweep(t0)
	slices.Sort(want)
	// Mark one key outside the top 5 hot: it is listed after them.
	tb.mu.Lock()
	e := tb.apps["app"].keys["g000"]
	e.hot = true
	tb.mu.Unlock()
	var got []string
	for _, s := range tb.topRule("app", 0, 5, t0) {
		got = append(got, s.Key)
	}
	var w []string
	for _, s := range want[:5] {
		w = append(w, s[len(s)-4:])
	}
	w = append(w, "g000")
	if !slices.Equal(got, w) {
		t.Errorf("topRule = %v, want %v", got, w)
	}
}
