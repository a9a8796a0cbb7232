package loadgen

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// decoded is what a consumer sees in a set of record values.
type decoded struct {
	totals   map[AppKey]uint64
	events   int64
	entries  int64
	minTS    map[AppKey]int64 // earliest timestamp per key
	maxEntry int              // most entries in one record
	maxLines int              // most lines in one record
}

func decodeAll(t testing.TB, values [][]byte) decoded {
	t.Helper()
	d := decoded{totals: make(map[AppKey]uint64), minTS: make(map[AppKey]int64)}
	var dec wire.Decoder
	for i, v := range values {
		n := 0
		err := dec.Decode(v, func(e *wire.Entry) {
			ak := AppKey{string(e.App), string(e.Key)}
			d.totals[ak] += e.Count
			d.events += int64(e.Count)
			d.entries++
			n++
			if old, ok := d.minTS[ak]; !ok || e.TS < old {
				d.minTS[ak] = e.TS
			}
		})
		if err != nil {
			t.Fatalf("record %d (%q): %v", i, v[:min(len(v), 80)], err)
		}
		d.maxEntry = max(d.maxEntry, n)
		d.maxLines = max(d.maxLines, bytes.Count(v, []byte{'\n'})+1)
	}
	return d
}

// checkAgainstTruth decodes what the sink got and compares it with the
// run's stats and truth.
func checkAgainstTruth(t testing.TB, values [][]byte, st Stats) decoded {
	t.Helper()
	d := decodeAll(t, values)
	if d.events != st.Events || d.entries != st.Entries || int64(len(values)) != st.Records {
		t.Errorf("decoded %d events, %d entries, %d records; stats say %d, %d, %d",
			d.events, d.entries, len(values), st.Events, st.Entries, st.Records)
	}
	var bytes int64
	for _, v := range values {
		bytes += int64(len(v))
	}
	if bytes != st.Bytes {
		t.Errorf("decoded %d bytes, stats say %d", bytes, st.Bytes)
	}
	for ak, want := range st.Truth.Totals() {
		if got := d.totals[ak]; got != want {
			t.Errorf("key %v: %d events decoded, truth says %d", ak, got, want)
		}
	}
	return d
}

// TestGeneratorForms generates every form directly (no clock) and decodes it
// back: each key the truth tracks adds up to its truth, every event is in a
// record, records respect Lines and BatchEntries, and timestamps fall in the
// tick (or flush interval) that produced them.
func TestGeneratorForms(t *testing.T) {
	const startMs = 1_700_000_000_000
	flashes := []Flash{
		{Key: "item:hot", Start: 200 * time.Millisecond, Ramp: 300 * time.Millisecond, Rate: 4000}, // app0
		{App: "shop", Key: "cart:7", Rate: 700},                                                    // an app without background
		{App: "app1", Key: "k:902", Rate: 300},                                                     // named like an untracked background key
		{App: "app0", Key: "k:1", Start: time.Second, Rate: 100},                                   // named like a tracked one
	}
	for _, form := range []Form{FormBinary, FormJSON, FormNDJSON} {
		t.Run(form.String(), func(t *testing.T) {
			c := testConfig(t, Config{Form: form, Rate: 20_000, Keys: 1000, Skew: 1.1, Apps: 3, Threshold: 500,
				Flashes: flashes, Lines: 7, BatchEntries: 50})
			g, err := newGenerator(c, startMs)
			if err != nil {
				t.Fatal(err)
			}
			var values [][]byte
			const ticks = 150 // 1.5 s
			for i := range int64(ticks) {
				for _, r := range g.step(i) {
					values = append(values, r.Value)
				}
			}
			for _, r := range g.finish() {
				values = append(values, r.Value)
			}
			st := g.stats
			st.Truth = g.truth
			d := checkAgainstTruth(t, values, st)
			if want := int64(20_000*1.5) + 4600 + 1050 + 450 + 50; st.Events != want {
				t.Errorf("%d events, want %d", st.Events, want)
			}
			switch form {
			case FormBinary:
				if d.maxEntry > 50 {
					t.Errorf("a batch holds %d entries, want <= 50", d.maxEntry)
				}
			case FormNDJSON:
				if d.maxLines != 7 {
					t.Errorf("most lines in a record: %d, want 7", d.maxLines)
				}
			case FormJSON:
				if st.Records != st.Events {
					t.Errorf("%d records for %d events, want one each", st.Records, st.Events)
				}
			}
			// The flash starts at 200 ms; its first event is stamped with the
			// start of its tick (JSON) or of its flush interval (binary).
			first := int64(0)
			for math.Floor(flashes[0].cumulative(time.Duration(first+1)*10*time.Millisecond)) < 1 {
				first++
			}
			want := int64(startMs + first*10)
			if form == FormBinary {
				want = startMs + first/10*100
			}
			if ts := d.minTS[AppKey{"app0", "item:hot"}]; ts != want {
				t.Errorf("first item:hot event stamped at +%d ms, want +%d ms", ts-startMs, want-startMs)
			}
			// Truth keys: tracked ranks, then the planted keys not already there.
			keys := map[AppKey]TruthKey{}
			for _, k := range g.truth.Keys {
				keys[AppKey{k.App, k.Key}] = k
			}
			if k := keys[AppKey{"app0", "k:1"}]; !k.Planted || k.Rank != 1 || k.Expected < 100 {
				t.Errorf("k:1 in truth: %+v, want planted, rank 1, expected rate > 100", k)
			}
			if k := keys[AppKey{"app1", "k:902"}]; !k.Planted || k.Rank != 902 {
				t.Errorf("k:902 in truth: %+v, want planted, rank 902", k)
			}
		})
	}
}

// TestTracked checks which background ranks the truth holds: exactly those
// expected at >= 0.3 of the threshold.
func TestTracked(t *testing.T) {
	for _, tc := range []struct {
		rate, skew, threshold float64
	}{
		{50_000, 1.1, 1000}, {50_000, 0.8, 1000}, {200_000, 0.8, 1000}, {1000, 1.1, 1000},
	} {
		c := testConfig(t, Config{Rate: tc.rate, Skew: tc.skew, Threshold: tc.threshold})
		g, err := newGenerator(c, 0)
		if err != nil {
			t.Fatal(err)
		}
		floor := TrackFraction * tc.threshold
		n := uint64(len(g.truth.Keys))
		if n > 0 && tc.rate*g.zipf.prob(n) < floor {
			t.Errorf("rate %v skew %v: rank %d tracked at %.1f/s, want >= %.1f", tc.rate, tc.skew, n, tc.rate*g.zipf.prob(n), floor)
		}
		if next := tc.rate * g.zipf.prob(n+1); next >= floor {
			t.Errorf("rate %v skew %v: rank %d untracked at %.1f/s, want < %.1f", tc.rate, tc.skew, n+1, next, floor)
		}
		t.Logf("rate %v skew %v threshold %v: %d ranks tracked, rank 1 at %.0f/s", tc.rate, tc.skew, tc.threshold, n, tc.rate*g.zipf.prob(1))
	}
}
