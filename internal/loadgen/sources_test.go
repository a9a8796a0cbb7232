package loadgen

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/ingest"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

// srcAccess is one decoded access with its source.
type srcAccess struct {
	App, Key, Src string
	Count         uint64
}

// decodeSources decodes recs as hotspotd does for c's form: the wire
// format for binary, json and ndjson, c.InputFile through package ingest
// for combined and mapped-json. Each record's accesses, in order; a record
// or line dropped fails the test.
func decodeSources(t testing.TB, c Config, recs []Record) [][]srcAccess {
	t.Helper()
	file, err := c.InputFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ingest.Parse(file)
	if err != nil {
		t.Fatalf("the input file of %s: %v\n%s", c.Form, err, file)
	}
	var reasons []ingest.Reason
	dec := cfg.Inputs[0].NewDecoder(0, func(r ingest.Reason) { reasons = append(reasons, r) })
	out := make([][]srcAccess, len(recs))
	for i, r := range recs {
		err := dec.Decode(r.Value, func(e *wire.Entry) {
			out[i] = append(out[i], srcAccess{App: string(e.App), Key: string(e.Key), Src: string(e.Src), Count: e.Count})
		})
		if err != nil || len(reasons) > 0 {
			t.Fatalf("record %d (%q): %v, reasons %v", i, r.Value[:min(len(r.Value), 200)], err, reasons)
		}
	}
	return out
}

// TestSourcesForms generates a run with sources in every form and decodes
// it back as hotspotd would: every access names one of the instances
// (binary: each record is a version 3 batch of one instance), the planted
// keys' events per source are exactly the truth's, a top source gets its
// share exactly, and every key adds up to its truth.
func TestSourcesForms(t *testing.T) {
	const n = 5
	flashes := []Flash{
		{Key: "item:hot", Start: 200 * time.Millisecond, Ramp: 300 * time.Millisecond, Rate: 4000, TopSource: "inst-0", TopShare: 0.7},
		{App: "shop", Key: "cart:7", Rate: 700},                                                    // uniform over the instances
		{App: "app0", Key: "k:1", Start: time.Second, Rate: 100, TopSource: "inst-3", TopShare: 1}, // also a background key
	}
	for f := range numForms {
		t.Run(f.String(), func(t *testing.T) {
			c := Config{Form: f, Rate: 20_000, Keys: 1000, Skew: 1.1, Apps: 3, Threshold: 500, Sources: n,
				Flashes: flashes, BatchEntries: 50, Lines: 3}
			if f == FormCombined || f == FormMappedJSON {
				c.Flashes = append([]Flash(nil), flashes...)
				c.Flashes[2].TopSource = SourceName(f, 3) // the form's own name of inst-3 works too
			}
			recs, st := generate(t, c, 150)
			got := decodeSources(t, c, recs)
			names := map[string]bool{}
			for i := range n {
				names[SourceName(f, i)] = true
			}
			perSrc := map[AppKey]map[string]uint64{}
			totals := map[AppKey]uint64{}
			var events int64
			for i, accs := range got {
				if int64(len(accs)) == 0 {
					t.Fatalf("record %d: no access", i)
				}
				for _, a := range accs {
					if !names[a.Src] {
						t.Fatalf("record %d: source %q, want one of %v", i, a.Src, names)
					}
					if f == FormBinary && a.Src != accs[0].Src {
						t.Fatalf("record %d: sources %q and %q in one batch", i, accs[0].Src, a.Src)
					}
					ak := AppKey{a.App, a.Key}
					if perSrc[ak] == nil {
						perSrc[ak] = map[string]uint64{}
					}
					perSrc[ak][a.Src] += a.Count
					totals[ak] += a.Count
					events += int64(a.Count)
				}
				if f == FormBinary && recs[i].Value[1] != 3 {
					t.Fatalf("record %d: batch version %d, want 3", i, recs[i].Value[1])
				}
			}
			if events != st.Events {
				t.Errorf("decoded %d events, stats say %d", events, st.Events)
			}
			for ak, want := range st.Truth.Totals() {
				if totals[ak] != want {
					t.Errorf("key %v: %d events decoded, truth says %d", ak, totals[ak], want)
				}
			}
			tr := st.Truth
			for _, fl := range c.Flashes {
				app := fl.App
				if app == "" {
					app = "app0"
				}
				ak := AppKey{app, fl.Key}
				want := tr.SourceCounts(app, fl.Key)
				if fmt.Sprint(perSrc[ak]) != fmt.Sprint(want) {
					t.Errorf("%v per source: decoded %v, truth %v", ak, perSrc[ak], want)
				}
				shares := tr.SourceShares(app, fl.Key)
				var sum float64
				for _, sh := range shares {
					sum += sh
				}
				if math.Abs(sum-1) > 1e-9 {
					t.Errorf("%v: shares %v sum to %v", ak, shares, sum)
				}
				if fl.TopSource == "" {
					if d := tr.DistinctSources(app, fl.Key); d != n {
						t.Errorf("%v: %d distinct sources, want %d", ak, d, n)
					}
					continue
				}
				top := SourceName(f, sourceIndex(f, n, fl.TopSource))
				planted := st.Truth.Totals()[ak]
				if fl.Key == "k:1" {
					// The background's events of k:1 are spread over all.
					if tops := tr.TopSources(app, fl.Key, 1); tops[0].Source != top {
						t.Errorf("%v: busiest source %v, want %s", ak, tops, top)
					}
					continue
				}
				if wantTop := uint64(math.Floor(fl.TopShare * float64(planted))); want[top] != wantTop {
					t.Errorf("%v: %s sent %d of %d, want exactly floor(%v*%d) = %d", ak, top, want[top], planted, fl.TopShare, planted, wantTop)
				}
				if sh := shares[top]; math.Abs(sh-fl.TopShare) > 0.001 {
					t.Errorf("%v: %s's share %v, want %v", ak, top, sh, fl.TopShare)
				}
			}
			// The truth file names the top source as the records do.
			if w := tr.Workload; w.Sources != n || !strings.HasSuffix(w.Flashes[0], "~"+SourceName(f, 0)+":0.7") {
				t.Errorf("workload %+v", w)
			}
		})
	}
}

// TestSourcesKeepKeys: turning sources on changes no key, count or time:
// the instances are drawn apart from the keys.
func TestSourcesKeepKeys(t *testing.T) {
	for _, f := range []Form{FormBinary, FormNDJSON} {
		c := Config{Form: f, Rate: 20_000, Keys: 1000, Threshold: 500, Flashes: []Flash{{Key: "x", Rate: 900}}}
		_, without := generate(t, c, 50)
		c.Sources, c.SourceSkew = 7, 1.2
		_, with := generate(t, c, 50)
		if fmt.Sprint(without.Truth.Keys[0].Counts) != fmt.Sprint(with.Truth.Keys[0].Counts) || without.Events != with.Events {
			t.Errorf("%s: rank 1's counts %v without sources, %v with", f, without.Truth.Keys[0].Counts, with.Truth.Keys[0].Counts)
		}
	}
}

// TestSourceSkew: with SourceSkew the instances' shares follow Zipf, the
// first the busiest; without, they are even.
func TestSourceSkew(t *testing.T) {
	for _, tc := range []struct {
		skew float64
	}{{0}, {1.0}} {
		c := Config{Form: FormJSON, Rate: NoBackground, Sources: 4, SourceSkew: tc.skew, Flashes: []Flash{{Key: "k", Rate: 100_000}}}
		_, st := generate(t, c, 100) // 100,000 events
		z, _ := newZipf(4, max(tc.skew, 1e-300))
		for i := range 4 {
			want := 0.25
			if tc.skew > 0 {
				want = z.prob(uint64(i + 1))
			}
			got := st.Truth.SourceShares("app0", "k")[SourceName(FormJSON, i)]
			if math.Abs(got-want) > 0.01 {
				t.Errorf("skew %v: inst-%d's share %.4f, want %.4f", tc.skew, i, got, want)
			}
		}
	}
}

// TestSourcesEarly: early sends of a run with sources are version 3
// batches, one per instance, and the counts still add up.
func TestSourcesEarly(t *testing.T) {
	c := Config{Rate: NoBackground, Threshold: 1000, EarlyCount: 100, Sources: 3,
		Flashes: []Flash{{Key: "flash", Rate: 3000, TopSource: "inst-2", TopShare: 0.5}}}
	recs, st := generate(t, c, 100)
	got := decodeSources(t, c, recs)
	per := map[string]uint64{}
	for i, accs := range got {
		if recs[i].Value[1] != 3 {
			t.Fatalf("record %d: version %d", i, recs[i].Value[1])
		}
		for _, a := range accs {
			per[a.Src] += a.Count
		}
	}
	if want := st.Truth.SourceCounts("app0", "flash"); fmt.Sprint(per) != fmt.Sprint(want) || per["inst-2"] != 1500 {
		t.Errorf("per source %v, truth %v; want inst-2 at 1500", per, want)
	}
	if st.EarlyRecords != 9 { // 3 intervals, 3 instances
		t.Errorf("%d early records, want 9", st.EarlyRecords)
	}
}

// TestSourceLines checks the lines of each form with sources.
func TestSourceLines(t *testing.T) {
	c := Config{Rate: NoBackground, App: "shop", Sources: 300, Flashes: []Flash{{Key: "item:42", Rate: 100, TopSource: "inst-256", TopShare: 1}}}
	for _, tc := range []struct {
		form Form
		line string
	}{
		{FormJSON, `{"key":"item:42","app":"shop","ts":1700000000000,"src":"inst-256"}`},
		{FormCombined, `10.0.1.1 - shop [14/Nov/2023:22:13:20 +0000] "GET /shop/item:42 HTTP/1.1" 200 512 "-" "hotspot-load"`},
		{FormMappedJSON, `{"ts_ms":1700000000000,"service":"shop","request":{"method":"GET","uri":"/item/item:42","proto":"HTTP/1.1"},` +
			`"response":{"status":200,"size":512},"duration_ms":3,"client":{"ip":"10.0.1.1"}}`},
	} {
		c.Form = tc.form
		recs, _ := generate(t, c, 1)
		if len(recs) != 1 || string(recs[0].Value) != tc.line {
			t.Errorf("%s: %d records, the first %q; want %q", tc.form, len(recs), recs[0].Value, tc.line)
		}
		if got := decodeSources(t, c, recs); got[0][0].Src != SourceName(tc.form, 256) {
			t.Errorf("%s: source %q, want %q", tc.form, got[0][0].Src, SourceName(tc.form, 256))
		}
	}
}

func TestSourceNames(t *testing.T) {
	for _, tc := range []struct {
		form Form
		i    int
		want string
	}{
		{FormBinary, 0, "inst-0"}, {FormNDJSON, 65535, "inst-65535"},
		{FormCombined, 0, "10.0.0.1"}, {FormCombined, 254, "10.0.0.255"}, {FormCombined, 255, "10.0.1.0"},
		{FormMappedJSON, MaxSources - 1, "10.1.0.0"},
	} {
		if got := SourceName(tc.form, tc.i); got != tc.want {
			t.Errorf("SourceName(%s, %d) = %q, want %q", tc.form, tc.i, got, tc.want)
		}
	}
	for f := range numForms {
		for _, i := range []int{0, 1, 254, 255, 256, 70, MaxSources - 1} {
			if got := sourceIndex(f, MaxSources, SourceName(f, i)); got != i {
				t.Errorf("%s: sourceIndex(%q) = %d, want %d", f, SourceName(f, i), got, i)
			}
			if got := sourceIndex(f, MaxSources, "inst-"+fmt.Sprint(i)); got != i {
				t.Errorf("%s: sourceIndex(inst-%d) = %d", f, i, got)
			}
		}
		for _, name := range []string{"inst-5", "inst-05", "inst--1", "inst-", "10.0.0.6", "10.0.0.0", "10.0.0.01", "11.0.0.1", "10.0.0", "x"} {
			if got := sourceIndex(f, 5, name); got >= 0 {
				t.Errorf("%s: sourceIndex(5, %q) = %d, want -1", f, name, got)
			}
		}
	}
}

func TestSourcesConfig(t *testing.T) {
	top := func(src string, share float64) []Flash {
		return []Flash{{Key: "k", Rate: 1, TopSource: src, TopShare: share}}
	}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Sources: -1}, "Sources -1 must be in 0..65536"},
		{Config{Sources: MaxSources + 1}, "must be in 0..65536"},
		{Config{SourceSkew: 1}, "SourceSkew needs Sources > 0"},
		{Config{Sources: 2, SourceSkew: -1}, "SourceSkew -1 must be >= 0"},
		{Config{Sources: 2, SourceSkew: math.NaN()}, "must be >= 0"},
		{Config{Flashes: top("inst-0", 1)}, "a top source needs Sources > 0"},
		{Config{Sources: 2, Flashes: top("inst-2", 1)}, `no source "inst-2" among the 2 (inst-0..inst-1, or inst-0..inst-1)`},
		{Config{Sources: 2, Form: FormCombined, Flashes: top("10.0.0.3", 1)}, `(inst-0..inst-1, or 10.0.0.1..10.0.0.2)`},
		{Config{Sources: 2, Flashes: top("10.0.0.1", 1)}, `no source "10.0.0.1"`},
		{Config{Sources: 1, Flashes: top("inst-0", 0.5)}, "a top share below 1 needs another source"},
		{Config{Sources: 2, Flashes: top("inst-0", 0)}, "SHARE must be in (0, 1]"},
		{Config{Sources: 2, Flashes: top("inst-0", 1.5)}, "SHARE must be in (0, 1]"},
		{Config{Sources: 2, Flashes: top("", 0.5)}, "a top share without a top source"},
	} {
		tc.c.Sink = &fakeSink{}
		if err := tc.c.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Check: %v, want an error with %q", tc.c, err, tc.want)
		}
	}
	for _, c := range []Config{
		{Sources: 1, Flashes: top("inst-0", 1)},
		{Sources: 3, SourceSkew: 0.8, Form: FormMappedJSON, Flashes: top("10.0.0.3", 0.9)},
		{Sources: MaxSources},
	} {
		c.Sink = &fakeSink{}
		if err := c.Check(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestParseFlashSource(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Flash
	}{
		{"item:42@0s=2x~inst-0:0.7", Flash{Key: "item:42", Rate: 2000, TopSource: "inst-0", TopShare: 0.7}},
		{"shop/a~b@1s+1s..5s=300~10.0.0.1:70%", Flash{App: "shop", Key: "a~b", Start: time.Second, Ramp: time.Second, End: 5 * time.Second, Rate: 300, TopSource: "10.0.0.1", TopShare: 0.7}},
		{"k@0s=1~inst-1:1", Flash{Key: "k", Rate: 1, TopSource: "inst-1", TopShare: 1}},
	} {
		got, err := ParseFlash(tc.spec, 1000)
		if err != nil || got != tc.want {
			t.Errorf("ParseFlash(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
			continue
		}
		if back, err := ParseFlash(got.String(), 1000); err != nil || back != got {
			t.Errorf("ParseFlash(%q) = %+v, %v; want %+v", got.String(), back, err, got)
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{"k@0s=1~inst-0", "no 'SOURCE:SHARE'"},
		{"k@0s=1~:0.5", "no 'SOURCE:SHARE'"},
		{"k@0s=1~inst-0:lots", "SHARE"},
		{"k@0s=1~inst-0:0", "SHARE must be in (0, 1]"},
		{"k@0s=1~inst-0:120%", "SHARE must be in (0, 1]"},
		{"k@0s=x~inst-0:0.5", "RATE"},
	} {
		if _, err := ParseFlash(tc.spec, 1000); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlash(%q): %v, want an error mentioning %q", tc.spec, err, tc.want)
		}
	}
}

func TestTruthSources(t *testing.T) {
	tr := truthOf([]uint64{5}, []uint64{5}, []uint64{0})
	tr.Workload = Workload{Form: "combined", Sources: 4}
	tr.Keys[0].Sources = []uint64{0, 3, 1, 1}
	tr.Keys[2].Sources = []uint64{0, 0, 0, 0}
	if got, want := fmt.Sprint(tr.SourceCounts("a", "p")), "map[10.0.0.2:3 10.0.0.3:1 10.0.0.4:1]"; got != want {
		t.Errorf("SourceCounts = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(tr.SourceShares("a", "p")), "map[10.0.0.2:0.6 10.0.0.3:0.2 10.0.0.4:0.2]"; got != want {
		t.Errorf("SourceShares = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(tr.TopSources("a", "p", 2)), "[{10.0.0.2 0.6} {10.0.0.3 0.2}]"; got != want {
		t.Errorf("TopSources = %s, want %s", got, want)
	}
	if got := tr.DistinctSources("a", "p"); got != 3 {
		t.Errorf("DistinctSources = %d, want 3", got)
	}
	// A key without per-source counts, a key that sent nothing, no key.
	for _, k := range []string{"q", "r", "none"} {
		if c, s, d := tr.SourceCounts("a", k), tr.SourceShares("a", k), tr.DistinctSources("a", k); len(c) != 0 || len(s) != 0 || d != 0 {
			t.Errorf("%s: %v %v %d, want nothing", k, c, s, d)
		}
	}
	if tr.SourceCounts("a", "q") != nil || tr.SourceCounts("a", "r") == nil {
		t.Errorf("SourceCounts: nil means no per-source counts")
	}
	// The file keeps them.
	path := filepath.Join(t.TempDir(), "truth.json")
	if err := tr.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var back Truth
	if err := json.Unmarshal(b, &back); err != nil || back.DistinctSources("a", "p") != 3 || back.Workload.Sources != 4 {
		t.Errorf("read back %s: %v", b, err)
	}
	if strings.Contains(string(b), `"sources":[0,0,0,0]`) == false || strings.Count(string(b), `"sources"`) != 3 {
		t.Errorf("file %s: want the two keys' sources and the workload's", b)
	}
}

// TestHideSources: HideSources writes the records of a run with sources,
// entry for entry, as version 2 batches without the source.
func TestHideSources(t *testing.T) {
	c := Config{Form: FormBinary, Rate: 20_000, Keys: 1000, Skew: 1.1, Threshold: 500, Sources: 7, BatchEntries: 50}
	with, stWith := generate(t, c, 50)
	c.HideSources = true
	hidden, stHidden := generate(t, c, 50)
	if len(with) != len(hidden) || stWith.Entries != stHidden.Entries || stWith.Events != stHidden.Events {
		t.Fatalf("hidden: %d records, %d entries; with sources %d, %d", len(hidden), stHidden.Entries, len(with), stWith.Entries)
	}
	for i, r := range hidden {
		if r.Value[1] != 2 || with[i].Value[1] != 3 {
			t.Fatalf("record %d: version %d hidden, %d with sources; want 2 and 3", i, r.Value[1], with[i].Value[1])
		}
	}
	if _, err := (Config{Form: FormJSON, Sources: 3, HideSources: true}).withDefaults(); err == nil {
		t.Errorf("HideSources with the json form accepted")
	}
}
