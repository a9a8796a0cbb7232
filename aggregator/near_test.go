package aggregator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axiomhq/hyperloglog"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotspot-dev/hotspot/hotset/decision"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// srcRound is one detector round of key k of app "app": its count, the
// busiest sources it saw (sent with the count as their total, as a
// detector reports them) and a sketch of all of them, and the effect the
// apps reported of it.
type srcRound struct {
	count    uint64
	top      []wire.SourceCount
	distinct []string // every source of the round, for its sketch; nil: no sketch
	effect   *wire.EffectCounts
}

// body is r as a version 7 partials body from detector src, its accesses
// over the 100 ms before now less 50 ms.
func (r srcRound) body(src string, seq uint64, now time.Time) []byte {
	end := now.Add(-50 * time.Millisecond).UnixMilli()
	b := &wire.PartialBatch{Source: src, Seq: seq, At: now.UnixMilli(), Span: 100, End: end}
	if r.count > 0 {
		b.Groups = []wire.PartialGroup{{App: "app", Entries: []wire.KeyCount{{Key: "k", Count: r.count}}}}
	}
	if len(r.top) > 0 || r.distinct != nil {
		ps := wire.PartialSources{App: "app", Key: "k", Total: r.count, Top: r.top}
		if r.distinct != nil {
			ps.Distinct = sketchOf(r.distinct...)
		}
		b.Sources = []wire.PartialSources{ps}
	}
	if r.effect != nil {
		b.Effects = []wire.PartialEffect{{App: "app", Key: "k", EffectCounts: *r.effect}}
	}
	return wire.AppendPartials(nil, b)
}

// sketchOf is a detector's sketch of names (detector/sources.go).
func sketchOf(names ...string) []byte {
	sk, _ := hyperloglog.NewSketch(distinctPrecision, true)
	for _, n := range names {
		sk.Insert([]byte(n))
	}
	b, _ := sk.MarshalBinary()
	return b
}

// feed applies rounds every 100 ms from start (one detector, unnumbered),
// sweeping after each, and returns the time after the last.
func feed(t *testing.T, a *Aggregator, start time.Time, rounds int, round func(i int) srcRound) time.Time {
	t.Helper()
	now := start
	for i := range rounds {
		if _, err := a.apply(round(i).body("d1", 0, now), now); err != nil {
			t.Fatal(err)
		}
		a.t.sweep(now)
		now = now.Add(100 * time.Millisecond)
	}
	return now
}

// TestSourcesShares: a key at 3000/s, one source sending 70 % of it and
// the rest spread over many small ones, of which each round's busiest 16
// reach the shard (as a detector sends them). The 70 % source is named
// first with its share within 5 points; the sources listed are at most 8,
// busiest first, and their shares add up to at most 1.
func TestSourcesShares(t *testing.T) {
	for _, others := range []int{30, 300} {
		t.Run(fmt.Sprint(others, " small sources"), func(t *testing.T) {
			a := mustNew(t, Config{}, &fakePub{})
			const perRound = 300 // 3000/s
			small := uint64(max(1, 90/others))
			now := feed(t, a, t0, 40, func(i int) srcRound {
				top := []wire.SourceCount{{Src: "web-1", N: 210}}
				for j := range 15 { // the round's next busiest: 15 of the small ones, in turn
					top = append(top, wire.SourceCount{Src: fmt.Sprintf("web-%03d", 2+(i*15+j)%others), N: small})
				}
				return srcRound{count: perRound, top: top}
			})
			st, ok := a.t.key("app", "k", now)
			if !ok || !st.Hot {
				t.Fatalf("key %+v (tracked %v), want hot", st, ok)
			}
			t.Logf("sources %+v, distinct %d", st.Sources, st.DistinctSources)
			if len(st.Sources) == 0 || st.Sources[0].Source != "web-1" || math.Abs(st.Sources[0].Share-0.70) > 0.05 {
				t.Fatalf("sources %+v, want web-1 first with 0.70 ± 0.05", st.Sources)
			}
			if len(st.Sources) > shardapi.MaxSources {
				t.Errorf("%d sources listed, want at most %d", len(st.Sources), shardapi.MaxSources)
			}
			sum := 0.0
			for i, s := range st.Sources {
				sum += s.Share
				if i > 0 && s.Share > st.Sources[i-1].Share {
					t.Errorf("sources not busiest first: %+v", st.Sources)
				}
				if i > 0 && s.Share > 0.05 {
					t.Errorf("small source %s at share %.3f, want at most 0.05", s.Source, s.Share)
				}
			}
			if sum > 1+1e-9 {
				t.Errorf("shares add up to %v > 1: %+v", sum, st.Sources)
			}
			if n := len(a.t.apps["app"].keys["k"].near.src.top); n > maxKeySources {
				t.Errorf("%d sources kept, want at most %d", n, maxKeySources)
			}
		})
	}
}

// TestSourcesFollowTheWindow: the busiest source changes; within a few
// windows the new one is named first with its share, and the old one's
// share has faded.
func TestSourcesFollowTheWindow(t *testing.T) {
	a := mustNew(t, Config{}, &fakePub{})
	now := feed(t, a, t0, 30, func(int) srcRound {
		return srcRound{count: 300, top: []wire.SourceCount{{Src: "old", N: 240}, {Src: "x", N: 60}}}
	})
	now = feed(t, a, now, 40, func(int) srcRound {
		return srcRound{count: 300, top: []wire.SourceCount{{Src: "new", N: 240}, {Src: "x", N: 60}}}
	})
	st, _ := a.t.key("app", "k", now)
	if len(st.Sources) < 2 || st.Sources[0].Source != "new" || math.Abs(st.Sources[0].Share-0.8) > 0.05 {
		t.Fatalf("sources %+v, want new first at 0.80 ± 0.05", st.Sources)
	}
	for _, s := range st.Sources {
		if s.Source == "old" && s.Share > 0.05 {
			t.Errorf("old at %.3f four windows after it stopped, want below 0.05", s.Share)
		}
	}
}

// TestSharesFromReports: two detectors count a key every round and report
// its sources once a second, in the same round (the detectors report in
// the round that passes a whole second), each report with the key's total
// over its rounds; one sees the key's busiest source, the other only small
// ones. A share is read after every round: it stays at what the sources
// sent (both sides of it come in the same reports, so it does not swing
// between them). A report without a total, from a detector older than
// partial-count version 7, counts its sources as the whole.
func TestSharesFromReports(t *testing.T) {
	a := mustNew(t, Config{}, &fakePub{})
	// A second of the key: 1500 accesses, 1050 from web-1 (all on d0), 300
	// from web-2 (half on each), the rest from sources too small to be
	// named.
	reports := []wire.PartialSources{
		{App: "app", Key: "k", Total: 1200, Top: []wire.SourceCount{{Src: "web-1", N: 1050}, {Src: "web-2", N: 150}}},
		{App: "app", Key: "k", Total: 300, Top: []wire.SourceCount{{Src: "web-2", N: 150}}},
	}
	now := t0
	apply := func(src string, b *wire.PartialBatch) {
		t.Helper()
		b.Source, b.At, b.Span, b.End = src, now.UnixMilli(), 100, now.Add(-50*time.Millisecond).UnixMilli()
		if _, err := a.apply(wire.AppendPartials(nil, b), now); err != nil {
			t.Fatal(err)
		}
	}
	counts := []wire.PartialGroup{{App: "app", Entries: []wire.KeyCount{{Key: "k", Count: 150}}}}
	for i := range 60 {
		for d, r := range reports {
			b := &wire.PartialBatch{Groups: counts}
			if i%10 == 0 {
				b.Sources = []wire.PartialSources{r}
			}
			apply(fmt.Sprint("d", d), b)
		}
		a.t.sweep(now)
		now = now.Add(100 * time.Millisecond)
		if i < 20 {
			continue // hot from about round 7; its state begins at a report after that
		}
		st, _ := a.t.key("app", "k", now)
		sum := 0.0
		for _, s := range st.Sources {
			sum += s.Share
		}
		if len(st.Sources) != 2 || st.Sources[0].Source != "web-1" || math.Abs(st.Sources[0].Share-0.7) > 0.005 || math.Abs(sum-0.9) > 0.005 {
			t.Fatalf("round %d: sources %+v (sum %.4f), want web-1 at 0.70 and web-2 at 0.20", i, st.Sources, sum)
		}
	}
	// An older detector's report: no total.
	a = mustNew(t, Config{}, &fakePub{})
	for range 20 {
		apply("d1", &wire.PartialBatch{Groups: counts})
		a.t.sweep(now)
		now = now.Add(100 * time.Millisecond)
	}
	top := []wire.SourceCount{{Src: "web-1", N: 1050}, {Src: "web-2", N: 300}}
	apply("d1", &wire.PartialBatch{Sources: []wire.PartialSources{{App: "app", Key: "k", Top: top}}})
	st, _ := a.t.key("app", "k", now)
	if len(st.Sources) != 2 || math.Abs(st.Sources[0].Share-0.7778) > 0.001 {
		t.Errorf("no total: sources %+v, want web-1 at 1050/1350 of the sources named", st.Sources)
	}
}

// TestDistinctSources: 1000 distinct sources, each round's sketch holding
// a tenth of them in turn: the estimate is within 10 %, and so for 20 000.
func TestDistinctSources(t *testing.T) {
	for _, n := range []int{8, 1000, 20_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			a := mustNew(t, Config{}, &fakePub{})
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("10.1.%d.%d:%d", i/250, i%250, 40000+i)
			}
			per := max(1, n/10)
			now := feed(t, a, t0, 35, func(i int) srcRound {
				from := (i % 10) * per % n
				return srcRound{count: 300, top: []wire.SourceCount{{Src: names[from], N: 1}},
					distinct: names[from:min(from+per, n)]}
			})
			st, _ := a.t.key("app", "k", now)
			t.Logf("distinct sources %d of %d", st.DistinctSources, n)
			if got := float64(st.DistinctSources); math.Abs(got-float64(n)) > 0.1*float64(n) {
				t.Errorf("distinct sources %v, want %d ± 10 %%", got, n)
			}
		})
	}
}

// TestEffect: four instances report their effect on a hot key every 5 s,
// at different phases: the key's effect is their sum per second over the
// 10 s window, served_l1 the L1's part of the reads, the shard lists it
// in Effects, and the app's totals count every report.
func TestEffect(t *testing.T) {
	a := mustNew(t, Config{}, &fakePub{})
	rep := wire.EffectCounts{L1Hits: 4500, L2Reads: 400, SourceLoads: 50, Limited: 100} // one instance over 5 s
	// Instance j reports at j*1.3 s + 5 s*k; a round every 100 ms carries
	// the reports the detector read in it.
	now := feed(t, a, t0, 300, func(i int) srcRound {
		r := srcRound{count: 300}
		for j := range 4 {
			if ms := i*100 - j*1300; ms >= 0 && ms%5000 == 0 {
				if r.effect == nil {
					r.effect = &wire.EffectCounts{}
				}
				r.effect.L1Hits += rep.L1Hits
				r.effect.L2Reads += rep.L2Reads
				r.effect.SourceLoads += rep.SourceLoads
				r.effect.Limited += rep.Limited
			}
		}
		return r
	})
	// Between two rounds: the window's buckets hold 9.95 s of reports,
	// two of each instance, over which they are divided.
	st, _ := a.t.key("app", "k", now.Add(-50*time.Millisecond))
	want := shardapi.EffectRates{L1Hits: 3600, L2Reads: 320, SourceLoads: 40, Limited: 80} // the instances' rates
	near := func(got *shardapi.EffectRates) bool {
		return got != nil && math.Abs(got.L1Hits/want.L1Hits-1) < 0.01 && math.Abs(got.L2Reads/want.L2Reads-1) < 0.01 &&
			math.Abs(got.SourceLoads/want.SourceLoads-1) < 0.01 && math.Abs(got.Limited/want.Limited-1) < 0.01
	}
	if !near(st.Effect) {
		t.Fatalf("effect %+v, want %+v within 1 %%", st.Effect, want)
	}
	if st.ServedL1 == nil || math.Abs(*st.ServedL1-0.9) > 1e-9 {
		t.Errorf("served_l1 %v, want 0.9", st.ServedL1)
	}
	if got := a.t.effects("", now.Add(-50*time.Millisecond)); len(got) != 1 || got[0].Key != "k" || !near(&got[0].Effect) {
		t.Errorf("Effects = %+v, want k at %+v", got, want)
	}
	if got := a.t.effects("other", now); len(got) != 0 {
		t.Errorf("Effects(other) = %+v, want none", got)
	}
	// The app's totals: every report of the 30 s.
	reports := 0
	for i := range 300 {
		for j := range 4 {
			if ms := i*100 - j*1300; ms >= 0 && ms%5000 == 0 {
				reports++
			}
		}
	}
	for i, o := range effectOutcomes {
		per := [4]uint64{rep.L1Hits, rep.L2Reads, rep.SourceLoads, rep.Limited}[i]
		if got := testutil.ToFloat64(a.m.effect.WithLabelValues("app", o)); got != float64(uint64(reports)*per) {
			t.Errorf("hotspot_effect_reads_total{outcome=%q} = %v, want %d", o, got, uint64(reports)*per)
		}
	}
	// The JSON of the key's state, as the internal API answers it.
	b, _ := json.Marshal(st)
	for _, frag := range []string{`"effect":{"l1_hits":3618.`, `"served_l1":0.9`} { // 3600/s over 9.95 s
		if !strings.Contains(string(b), frag) {
			t.Errorf("KeyState JSON %s lacks %s", b, frag)
		}
	}
	// Reports stop: after the window the effect is gone.
	now = feed(t, a, now, 110, func(int) srcRound { return srcRound{count: 300} })
	if st, _ := a.t.key("app", "k", now); st.Effect != nil || st.ServedL1 != nil {
		t.Errorf("11 s after the last report: effect %+v served_l1 %v, want none", st.Effect, st.ServedL1)
	}
}

// TestColdKeyKeepsNothing: a key at a tenth of the threshold, with sources
// and effect reports, gets no state: its answers have none, Effects lists
// nothing (its reports still count in the app's totals). A key at 60 % of
// the threshold gets its state; it loses it once below 40 %, and with it
// when it is forgotten.
func TestColdKeyKeepsNothing(t *testing.T) {
	a := mustNew(t, Config{}, &fakePub{})
	round := func(count uint64) func(int) srcRound {
		return func(int) srcRound {
			return srcRound{count: count, top: []wire.SourceCount{{Src: "web-1", N: count}},
				distinct: []string{"web-1"}, effect: &wire.EffectCounts{L1Hits: 5, L2Reads: 5}}
		}
	}
	now := feed(t, a, t0, 30, round(10)) // 100/s
	st, ok := a.t.key("app", "k", now)
	if !ok || st.Sources != nil || st.DistinctSources != 0 || st.Effect != nil || st.ServedL1 != nil {
		t.Errorf("cold key %+v (tracked %v), want tracked without sources or effect", st, ok)
	}
	if eff := a.t.effects("", now); len(a.t.nears) != 0 || eff == nil || len(eff) != 0 {
		t.Errorf("%d keys with state, effects %+v: want none", len(a.t.nears), eff)
	}
	if got := testutil.ToFloat64(a.m.effect.WithLabelValues("app", "l1_hit")); got != 150 {
		t.Errorf("app's l1_hit total %v, want 150", got)
	}
	now = feed(t, a, now, 20, round(60)) // 600/s: near
	if st, _ := a.t.key("app", "k", now); st.Hot || len(st.Sources) != 1 || st.Effect == nil || len(a.t.nears) != 1 {
		t.Fatalf("key at 600/s: %+v with %d keys with state, want sources and effect", st, len(a.t.nears))
	}
	now = feed(t, a, now, 20, round(45)) // 450/s: kept
	if len(a.t.nears) != 1 {
		t.Fatalf("key at 450/s lost its state")
	}
	now = feed(t, a, now, 20, round(30)) // 300/s: dropped
	if st, _ := a.t.key("app", "k", now); len(a.t.nears) != 0 || st.Sources != nil || st.Effect != nil {
		t.Errorf("key at 300/s: %+v with %d keys with state, want none", st, len(a.t.nears))
	}
	feed(t, a, now, 20, round(60))
	if len(a.t.nears) != 1 {
		t.Fatalf("key back at 600/s without state")
	}
	a.t.sweep(now.Add(10 * time.Second)) // idle: forgotten, with its state
	if _, ok := a.t.key("app", "k", now.Add(10*time.Second)); ok || len(a.t.nears) != 0 {
		t.Errorf("idle key tracked %v with %d keys with state, want neither", ok, len(a.t.nears))
	}
	if got := testutil.ToFloat64(a.m.nearKeys); got != 0 {
		t.Errorf("near_keys = %v, want 0", got)
	}
}

// TestNearStateBounded: at most MaxNearKeys keys have state; a hot key
// takes the place of one that is not hot, never of a hot one; every key
// keeps at most 32 sources whatever it is sent; a sketch of another
// precision is refused and counted.
func TestNearStateBounded(t *testing.T) {
	a := mustNew(t, Config{MaxNearKeys: 10}, &fakePub{})
	now := t0
	body := func(seq uint64, keys []string, count uint64, src func(k string) []wire.SourceCount) []byte {
		b := &wire.PartialBatch{Source: "d1", Seq: seq, At: now.UnixMilli(), Span: 100, End: now.Add(-50 * time.Millisecond).UnixMilli()}
		g := wire.PartialGroup{App: "app"}
		for _, k := range keys {
			g.Entries = append(g.Entries, wire.KeyCount{Key: k, Count: count})
			b.Sources = append(b.Sources, wire.PartialSources{App: "app", Key: k, Top: src(k)})
		}
		b.Groups = []wire.PartialGroup{g}
		return wire.AppendPartials(nil, b)
	}
	var warm []string
	for i := range 30 {
		warm = append(warm, fmt.Sprint("warm", i))
	}
	seq := uint64(0)
	for i := range 20 { // 30 keys at 600/s, each round 16 new source names
		seq++
		b := body(seq, warm, 60, func(k string) []wire.SourceCount {
			var top []wire.SourceCount
			for j := range 16 {
				top = append(top, wire.SourceCount{Src: fmt.Sprintf("%s-src%d-%d", k, i, j), N: 3})
			}
			return top
		})
		if _, err := a.apply(b, now); err != nil {
			t.Fatal(err)
		}
		a.t.sweep(now)
		now = now.Add(100 * time.Millisecond)
	}
	if n := len(a.t.nears); n != 10 {
		t.Fatalf("%d keys with state, want MaxNearKeys 10", n)
	}
	for _, e := range a.t.nears {
		if len(e.near.src.top) > maxKeySources {
			t.Errorf("%s keeps %d sources, want at most %d", e.key, len(e.near.src.top), maxKeySources)
		}
	}
	// Ten hot keys take the places of the warm ones; one more finds only
	// hot keys and gets none.
	var hot []string
	for i := range 11 {
		hot = append(hot, fmt.Sprint("hot", i))
	}
	for range 5 {
		seq++
		b := body(seq, hot, 300, func(string) []wire.SourceCount { return []wire.SourceCount{{Src: "web-1", N: 300}} })
		if _, err := a.apply(b, now); err != nil {
			t.Fatal(err)
		}
		a.t.sweep(now)
		now = now.Add(100 * time.Millisecond)
	}
	withState := 0
	for _, e := range a.t.nears {
		if !e.hot {
			t.Errorf("warm key %s kept its state over hot keys", e.key)
		}
		withState++
	}
	if withState != 10 {
		t.Errorf("%d keys with state, want 10", withState)
	}
	// A sketch of precision 14 does not merge with those of 12.
	k := a.t.nears[0]
	sk := hyperloglog.New14()
	sk.Insert([]byte("x"))
	b14, _ := sk.MarshalBinary()
	for i, sk := range [][]byte{b14, []byte("not a sketch")} {
		b := &wire.PartialBatch{Source: "d1", At: now.UnixMilli(), Sources: []wire.PartialSources{{App: "app", Key: k.key, Distinct: sk}}}
		if _, err := a.apply(wire.AppendPartials(nil, b), now); err != nil {
			t.Fatalf("sketch %d: %v", i, err)
		}
	}
	if got := testutil.ToFloat64(a.m.sketchesRejected); got != 2 {
		t.Errorf("sketches_rejected_total = %v, want 2", got)
	}
}

// TestPromotionCarriesSources: the Recorder's promotion names the sources
// of the round that made the key hot, though they arrive after its counts.
func TestPromotionCarriesSources(t *testing.T) {
	a := mustNew(t, Config{Recorder: &fakeRecorder{}}, &fakePub{})
	feed(t, a, t0, 1, func(int) srcRound {
		return srcRound{count: 3000, top: []wire.SourceCount{{Src: "web-1", N: 2100}, {Src: "web-2", N: 900}}}
	})
	got := a.t.takeDecided(t0)
	if len(got) != 1 || got[0].Kind != decision.Promoted {
		t.Fatalf("decisions %+v, want one promotion", got)
	}
	want := []decision.SourceShare{{Source: "web-1", Share: 0.7}, {Source: "web-2", Share: 0.3}}
	if len(got[0].Sources) != 2 {
		t.Fatalf("promotion sources %+v, want %+v", got[0].Sources, want)
	}
	for i, s := range got[0].Sources {
		if s.Source != want[i].Source || math.Abs(s.Share-want[i].Share) > 1e-9 {
			t.Errorf("promotion sources %+v, want %+v", got[0].Sources, want)
		}
	}
}

// TestEffectsRoute: GET shardapi.EffectsPath lists the keys with effect, of one
// app or of all.
func TestEffectsRoute(t *testing.T) {
	a := mustNew(t, Config{}, &fakePub{})
	now := time.Now()
	r := srcRound{count: 3000, effect: &wire.EffectCounts{L1Hits: 90, L2Reads: 10}}
	if _, err := a.apply(r.body("d1", 1, now), now); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		target string
		want   int
	}{{shardapi.EffectsPath, 1}, {shardapi.EffectsPath + "?app=app", 1}, {shardapi.EffectsPath + "?app=other", 0}} {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", tt.target, nil))
		var got shardapi.Effects
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", tt.target, rec.Code, rec.Body)
		}
		if len(got.Keys) != tt.want || got.Shard != "s1" || got.Keys == nil {
			t.Errorf("GET %s = %s, want %d keys", tt.target, rec.Body, tt.want)
		}
		if tt.want == 1 {
			if f, ok := got.Keys[0].Effect.ServedL1(); !ok || math.Abs(f-0.9) > 1e-9 {
				t.Errorf("served_l1 %v %v, want 0.9", f, ok)
			}
		}
	}
}

// BenchmarkMemoryPerNearKey reports the heap a hot key's sources and
// effect take beyond its window (B/key): few sources (8 pods), many (a
// proxy's clients, 1000 distinct a round, 32 kept), and so many that both
// sketches are dense.
func BenchmarkMemoryPerNearKey(b *testing.B) {
	for _, tc := range []struct {
		name     string
		distinct int
	}{{"8_sources", 8}, {"1000_sources", 1000}, {"20000_sources", 20_000}} {
		b.Run(tc.name, func(b *testing.B) {
			const keys = 500
			names := make([]string, tc.distinct)
			for i := range names {
				names[i] = fmt.Sprintf("pod-%06d.example", i)
			}
			var per float64
			for range b.N {
				heap := func(withSources bool) float64 {
					// Without sources, MaxNearKeys 1 leaves every key but one without state.
					tb, _ := testTable(&testing.T{}, func(c *Config) {
						if !withSources {
							c.MaxNearKeys = 1
						}
					})
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					now := t0
					// Two periods of sketches (current and previous) and 32
					// sources: rounds over 2 s.
					for r := range 20 {
						var top []wire.SourceCount
						for j := range min(16, tc.distinct) {
							top = append(top, wire.SourceCount{Src: names[(r*16+j)%tc.distinct], N: 10})
						}
						per := max(1, tc.distinct/10)
						from := (r % 10) * per % tc.distinct
						sketch := sketchOf(names[from:min(from+per, tc.distinct)]...)
						tb.mu.Lock()
						tb.setReach(now)
						for k := range keys {
							key := []byte(fmt.Sprintf("k%09d", k))
							tb.add([]byte("app"), key, tally{n: 3000}, now, span{buckets: 1})
							if withSources {
								if p, ok := tb.keySources([]byte("app"), key, 3000, top, sketch, now); ok {
									p.merge(tb.m)
								}
								tb.effect([]byte("app"), key, wire.EffectCounts{L1Hits: 1, L2Reads: 1}, now)
							}
						}
						tb.mu.Unlock()
						now = now.Add(100 * time.Millisecond)
					}
					runtime.GC()
					runtime.ReadMemStats(&after)
					runtime.KeepAlive(tb)
					return float64(after.HeapAlloc) - float64(before.HeapAlloc)
				}
				per = (heap(true) - heap(false)) / keys
			}
			b.ReportMetric(per, "B/key")
		})
	}
}

// BenchmarkApplySources takes a round of 100 hot keys, each with its 16
// busiest sources and a sketch of n distinct ones (a partition's round):
// ns/key is the cost of a key's entries, the encoding of the body
// included. Without sketches (no_sketch, 16 sources) it is what the table
// lock is held for; the sketches are merged after it is released.
func BenchmarkApplySources(b *testing.B) {
	for _, n := range []int{-16, 8, 100, 1000} {
		name := fmt.Sprint(n, "_distinct")
		if n < 0 {
			name, n = "no_sketch", -n
		}
		b.Run(name, func(b *testing.B) {
			a, err := New(Config{ID: "s1", Addr: "x:1"}, &fakePub{})
			if err != nil {
				b.Fatal(err)
			}
			const keys = 100
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("10.0.%d.%d:%d", i/250, i%250, 40000+i)
			}
			pb := &wire.PartialBatch{Source: "d1", Span: 100}
			g := wire.PartialGroup{App: "app"}
			for k := range keys {
				key := fmt.Sprint("item:", k)
				g.Entries = append(g.Entries, wire.KeyCount{Key: key, Count: 3000})
				ps := wire.PartialSources{App: "app", Key: key}
				if name != "no_sketch" {
					ps.Distinct = sketchOf(names...)
				}
				for j := range min(16, n) {
					ps.Top = append(ps.Top, wire.SourceCount{Src: names[j], N: uint64(100 - j)})
				}
				pb.Sources = append(pb.Sources, ps)
			}
			pb.Groups = []wire.PartialGroup{g}
			now := time.Now()
			var base time.Duration
			{ // the counts alone, for comparison
				nb := *pb
				nb.Sources = nil
				body := wire.AppendPartials(nil, &nb)
				start := time.Now()
				for range 200 {
					if _, err := a.apply(body, now); err != nil {
						b.Fatal(err)
					}
				}
				base = time.Since(start) / 200
			}
			for b.Loop() {
				pb.At, pb.End = now.UnixMilli(), now.Add(-50*time.Millisecond).UnixMilli()
				body := wire.AppendPartials(nil, pb)
				if _, err := a.apply(body, now); err != nil {
					b.Fatal(err)
				}
				now = now.Add(100 * time.Millisecond)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/keys, "ns/key")
			b.ReportMetric(float64(base.Nanoseconds())/keys, "ns/key_counts_only")
		})
	}
}

// TestInstancesRoute: the effect of each instance, summed over its keys,
// per app; a silent instance is forgotten once the effect window passed; a
// full table leaves a new instance out and counts it.
func TestInstancesRoute(t *testing.T) {
	a := mustNew(t, Config{}, &fakePub{})
	now := time.Now()
	b := &wire.PartialBatch{Source: "d1", At: now.UnixMilli(), Seq: 1, Instances: []wire.PartialInstance{
		{App: "shop", Src: "pod-1", EffectCounts: wire.EffectCounts{L1Hits: 900, L2Reads: 50, Limited: 50}},
		{App: "shop", Src: "pod-2", EffectCounts: wire.EffectCounts{L1Hits: 10}},
		{App: "ads", Src: "pod-1", EffectCounts: wire.EffectCounts{L2Reads: 10, SourceLoads: 1}},
		{App: "shop", Src: "pod-1", EffectCounts: wire.EffectCounts{L1Hits: 100}}, // another detector's, summed
	}}
	if _, err := a.apply(wire.AppendPartials(nil, b), now); err != nil {
		t.Fatal(err)
	}
	get := func(target string) shardapi.Instances {
		t.Helper()
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		var got shardapi.Instances
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 || got.Shard != "s1" || got.Instances == nil {
			t.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
		slices.SortFunc(got.Instances, func(x, y shardapi.InstanceEffectRates) int {
			return cmp.Or(cmp.Compare(x.App, y.App), cmp.Compare(x.Instance, y.Instance))
		})
		return got
	}
	got := get(shardapi.InstancesPath + "?app=shop")
	if len(got.Instances) != 2 || got.Instances[0].Instance != "pod-1" || got.Instances[1].Instance != "pod-2" {
		t.Fatalf("shop's instances: %+v", got.Instances)
	}
	// 1000 hits, 50 reads and 50 limited within the newest second: the
	// window's 9 s and the part of it gone by.
	if f, ok := got.Instances[0].Effect.ServedL1(); !ok || math.Abs(f-1000.0/1100) > 1e-9 {
		t.Errorf("pod-1 served_l1 %v %v, want %v", f, ok, 1000.0/1100)
	}
	if h := got.Instances[0].Effect.L1Hits; h < 1000/10.0 || h > 1000/9.0 {
		t.Errorf("pod-1 l1_hits %v/s, want 1000 over 9 to 10 s", h)
	}
	if all := get(shardapi.InstancesPath); len(all.Instances) != 3 || all.Instances[0].App != "ads" {
		t.Errorf("every app's instances: %+v", all.Instances)
	}
	if got := a.t.instanceEffects("", now.Add(effectBuckets*effectBucket)); len(got) != 0 || len(a.t.instances) != 0 {
		t.Errorf("a window later: %+v, %d kept; want none", got, len(a.t.instances))
	}
	// Full: a new instance waits until a silent one can be pruned.
	a.t.mu.Lock()
	for i := range maxInstances {
		a.t.instance([]byte("shop"), []byte("pod-"+strconv.Itoa(i)), wire.EffectCounts{L1Hits: 1}, now)
	}
	a.t.instance([]byte("shop"), []byte("one-more"), wire.EffectCounts{L1Hits: 1}, now.Add(time.Second))
	_, kept := a.t.instances[instanceKey{"shop", "one-more"}]
	a.t.instance([]byte("shop"), []byte("one-more"), wire.EffectCounts{L1Hits: 1}, now.Add(effectBuckets*effectBucket))
	_, later := a.t.instances[instanceKey{"shop", "one-more"}]
	a.t.mu.Unlock()
	if kept || !later || len(a.t.instances) != 1 {
		t.Errorf("full: kept %v, then %v with %d instances; want false, true, 1", kept, later, len(a.t.instances))
	}
	if d := testutil.ToFloat64(a.m.instancesDropped); d != 1 {
		t.Errorf("instance_reports_dropped_total = %v, want 1", d)
	}
}
