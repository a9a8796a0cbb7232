package loadgen

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/ingest"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

// access is one access as a consumer sees it.
type access struct {
	App, Key string
	Count    uint64
	Op       wire.Op
	TS       int64 // the entry's time, or else its record's Kafka timestamp
	Src      int   // the instance (sourceIndex), -1 for none
}

func (a access) String() string {
	return fmt.Sprintf("%s/%s count %d op %d at %d from %d", a.App, a.Key, a.Count, a.Op, a.TS, a.Src)
}

// generate runs the generator for ticks ticks (no clock) and returns its
// records, stats and truth.
func generate(t testing.TB, c Config, ticks int64) ([]Record, Stats) {
	t.Helper()
	g, err := newGenerator(testConfig(t, c), 1_700_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for i := range ticks {
		recs = append(recs, g.step(i)...)
	}
	recs = append(recs, g.finish()...)
	st := g.stats
	st.Truth = g.truth
	return recs, st
}

// decodeInput decodes every record as hotspotd does with the input file of
// form for topic t (of a run with sources, if sources): each record's
// accesses, in order. A line that yields no access fails the test.
func decodeInput(t testing.TB, form Form, sources bool, recs []Record) [][]access {
	t.Helper()
	c := Config{Form: form, Topic: "t"}
	if sources {
		c.Sources = 1
	}
	file, err := c.InputFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ingest.Parse(file)
	if err != nil {
		t.Fatalf("the input file of %s: %v\n%s", form, err, file)
	}
	if len(cfg.Inputs) != 1 || cfg.Inputs[0].Topic != "t" {
		t.Fatalf("the input file of %s has inputs %+v, want one for topic t", form, cfg.Inputs)
	}
	var reasons []ingest.Reason
	dec := cfg.Inputs[0].NewDecoder(0, func(r ingest.Reason) { reasons = append(reasons, r) })
	out := make([][]access, len(recs))
	for i, r := range recs {
		err := dec.Decode(r.Value, func(e *wire.Entry) {
			ts := e.TS
			if ts == 0 {
				ts = r.TimeMs
			}
			src := -1
			if len(e.Src) > 0 {
				if src = sourceIndex(form, MaxSources, string(e.Src)); src < 0 {
					t.Fatalf("record %d: source %q names no instance", i, e.Src)
				}
			}
			out[i] = append(out[i], access{App: string(e.App), Key: string(e.Key), Count: e.Count, Op: e.Op, TS: ts, Src: src})
		})
		if err != nil || len(reasons) > 0 {
			t.Fatalf("record %d (%q): %v, reasons %v", i, r.Value[:min(len(r.Value), 200)], err, reasons)
		}
	}
	return out
}

// oddKeys are planted keys that combined carries as they are.
var oddKeys = []Flash{
	{Key: "user@example.com", Rate: 300},
	{App: "app1", Key: "a/b/c", Rate: 200},
	{App: "shop", Key: "ü:1", Start: 100 * time.Millisecond, Ramp: 200 * time.Millisecond, Rate: 2000},
	{App: "shop", Key: "%20#x[1]=&;", Rate: 100},
	{App: "app2", Key: "k:902", Rate: 300}, // named like an untracked background key
	{Key: "k:1", Start: 500 * time.Millisecond, Rate: 100},
}

// TestInputFileDecodes is the contract of the mapped forms: every record of
// combined and mapped-json, decoded with the form's input file through
// package ingest (as hotspotd --input decodes it), yields exactly the
// accesses that the same workload's ndjson records carry (the reference
// decoder: app, key, count, op and time), record by record and line by line,
// and so adds up to the truth. Odd keys included, and for mapped-json keys
// that combined refuses; with sources, each line's instance too.
func TestInputFileDecodes(t *testing.T) {
	mappedOnly := []Flash{
		{App: "shop", Key: `say "hi"?`, Rate: 150},
		{App: "shop", Key: "back\\slash and\ttab\nnewline", Rate: 120},
		{App: "my app/v2", Key: "q?x=1 y", Rate: 110},
	}
	for _, tc := range []struct {
		form    Form
		lines   int
		sources int
	}{
		{FormCombined, 0, 0}, {FormCombined, 7, 0}, {FormMappedJSON, 0, 0}, {FormMappedJSON, 7, 0},
		{FormCombined, 0, 300}, {FormMappedJSON, 7, 4},
	} {
		t.Run(fmt.Sprintf("%s/lines=%d/sources=%d", tc.form, tc.lines, tc.sources), func(t *testing.T) {
			flashes := append([]Flash{{Key: "item:hot", Start: 200 * time.Millisecond, Ramp: 300 * time.Millisecond, Rate: 4000}}, oddKeys...)
			if tc.form == FormMappedJSON {
				flashes = append(flashes, mappedOnly...)
			}
			c := Config{Form: tc.form, Rate: 20_000, Keys: 1000, Skew: 1.1, Apps: 3, Threshold: 500, Flashes: flashes, Lines: tc.lines, Sources: tc.sources}
			recs, st := generate(t, c, 120)
			ref := c
			ref.Form, ref.Lines = FormNDJSON, max(tc.lines, 1)
			refRecs, refSt := generate(t, ref, 120)
			if len(recs) != len(refRecs) || st.Events != refSt.Events || st.Entries != refSt.Entries {
				t.Fatalf("%d records, %d events, %d entries; ndjson: %d, %d, %d",
					len(recs), st.Events, st.Entries, len(refRecs), refSt.Events, refSt.Entries)
			}
			got := decodeInput(t, tc.form, tc.sources > 0, recs)
			want := decodeInput(t, FormNDJSON, false, refRecs)
			totals := make(map[AppKey]uint64)
			maxLines := 0
			var events, bytes int64
			for i := range recs {
				if len(got[i]) != len(want[i]) || int64(len(got[i])) != recs[i].Events {
					t.Fatalf("record %d: %d accesses, want %d (the record says %d events)", i, len(got[i]), len(want[i]), recs[i].Events)
				}
				for j, a := range got[i] {
					if tc.sources == 0 && a.Src != -1 || tc.sources > 0 && (a.Src < 0 || a.Src >= tc.sources) {
						t.Fatalf("record %d, line %d: instance %d of %d", i, j, a.Src, tc.sources)
					}
					if a != want[i][j] {
						t.Fatalf("record %d, line %d (%q): %v, want %v", i, j, strings.Split(string(recs[i].Value), "\n")[j], a, want[i][j])
					}
					totals[AppKey{a.App, a.Key}] += a.Count
					events += int64(a.Count)
				}
				if recs[i].TimeMs == 0 {
					t.Fatalf("record %d carries no Kafka timestamp", i)
				}
				maxLines = max(maxLines, len(got[i]))
				bytes += int64(len(recs[i].Value))
			}
			if wantLines := max(tc.lines, 1); maxLines != wantLines {
				t.Errorf("most lines in a record: %d, want %d", maxLines, wantLines)
			}
			if events != st.Events || int64(len(recs)) != st.Records || bytes != st.Bytes {
				t.Errorf("decoded %d events, %d records, %d bytes; stats say %d, %d, %d", events, len(recs), bytes, st.Events, st.Records, st.Bytes)
			}
			for ak, n := range st.Truth.Totals() {
				if totals[ak] != n {
					t.Errorf("key %v: %d events decoded, truth says %d", ak, totals[ak], n)
				}
			}
			for _, f := range flashes {
				app := f.App
				if app == "" {
					app = "app0"
				}
				if totals[AppKey{app, f.Key}] == 0 {
					t.Errorf("planted key %s/%q: no access decoded", app, f.Key)
				}
			}
		})
	}
}

// TestMappedLines checks the shape of a line of each mapped form, and what
// the input file makes of it beyond (app, key): bytes, op, time.
func TestMappedLines(t *testing.T) {
	c := Config{Rate: NoBackground, App: "shop", Flashes: []Flash{{Key: "item:42", Rate: 100}}}
	for _, tc := range []struct {
		form Form
		line string
	}{
		{FormCombined, `127.0.0.1 - shop [14/Nov/2023:22:13:20 +0000] "GET /shop/item:42 HTTP/1.1" 200 512 "-" "hotspot-load"`},
		{FormMappedJSON, `{"ts_ms":1700000000000,"service":"shop","request":{"method":"GET","uri":"/item/item:42","proto":"HTTP/1.1"},` +
			`"response":{"status":200,"size":512},"duration_ms":3,"client":{"ip":"127.0.0.1"}}`},
	} {
		c.Form = tc.form
		recs, _ := generate(t, c, 1) // 100/s: one access in the first 10 ms
		if len(recs) != 1 || string(recs[0].Value) != tc.line || recs[0].TimeMs != 1_700_000_000_000 {
			t.Fatalf("%s: %d records, the first %q at %d; want one, %q at 1700000000000", tc.form, len(recs), recs[0].Value, recs[0].TimeMs, tc.line)
		}
		file, _ := InputFile(tc.form, "t")
		cfg, err := ingest.Parse(file)
		if err != nil {
			t.Fatal(err)
		}
		var got []wire.Entry
		err = cfg.Inputs[0].NewDecoder(0, nil).Decode(recs[0].Value, func(e *wire.Entry) {
			got = append(got, wire.Entry{App: append([]byte(nil), e.App...), Key: append([]byte(nil), e.Key...), Count: e.Count, TS: e.TS, Bytes: e.Bytes, Op: e.Op})
		})
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v, %d accesses", tc.form, err, len(got))
		}
		e := got[0]
		wantTS := int64(0) // combined: the record's timestamp
		if tc.form == FormMappedJSON {
			wantTS = 1_700_000_000_000
		}
		if string(e.App) != "shop" || string(e.Key) != "item:42" || e.Count != 1 || e.Bytes != 512 || e.Op != wire.OpRead || e.TS != wantTS {
			t.Errorf("%s: decoded %s/%s count %d bytes %d op %d ts %d; want shop/item:42 count 1 bytes 512 op read ts %d",
				tc.form, e.App, e.Key, e.Count, e.Bytes, e.Op, e.TS, wantTS)
		}
	}
}

// TestCarriedRefused checks that combined refuses keys and apps its lines
// cannot carry as they are, with an error that says why, and that
// mapped-json refuses only invalid UTF-8.
func TestCarriedRefused(t *testing.T) {
	for _, tc := range []struct {
		form Form
		c    Config
		want string
	}{
		{FormCombined, Config{Flashes: []Flash{{Key: "a b", Rate: 1}}}, `the key "a b": it holds " "`},
		{FormCombined, Config{Flashes: []Flash{{Key: `say"`, Rate: 1}}}, `it holds "\""`},
		{FormCombined, Config{Flashes: []Flash{{Key: "q?x", Rate: 1}}}, `the key "q?x": it holds "?"`},
		{FormCombined, Config{Flashes: []Flash{{Key: `a\b`, Rate: 1}}}, `it holds "\\"`},
		{FormCombined, Config{Flashes: []Flash{{Key: "a\tb", Rate: 1}}}, `it holds "\t"`},
		{FormCombined, Config{Flashes: []Flash{{App: "my shop", Key: "k", Rate: 1}}}, `the app "my shop"`},
		{FormCombined, Config{App: "a/b"}, `the app "a/b": it holds "/"`},
		{FormCombined, Config{KeyPrefix: "key "}, `the key prefix "key 1"`},
		{FormCombined, Config{Flashes: []Flash{{Key: "\xff", Rate: 1}}}, "not valid UTF-8"},
		{FormMappedJSON, Config{Flashes: []Flash{{Key: "\xff", Rate: 1}}}, "form mapped-json cannot carry the key"},
	} {
		tc.c.Sink, tc.c.Form = &fakeSink{}, tc.form
		err := tc.c.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: Check: %v, want an error with %q", tc.form, tc.c, err, tc.want)
		}
	}
	// What the bench and load generate by default goes.
	for _, f := range []Form{FormCombined, FormMappedJSON} {
		c := Config{Sink: &fakeSink{}, Form: f, App: "bench-150405.000", Flashes: append(Planted("", 1000, 0.5, 1.2, 10), oddKeys...)}
		if err := c.Check(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		c = Config{Sink: &fakeSink{}, Form: f, Apps: 4, KeyPrefix: "bg:", Flashes: []Flash{{Key: "flash:1", Rate: 5}}}
		if err := c.Check(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestInputFile(t *testing.T) {
	for f := range numForms {
		b, err := InputFile(f, "bench.X_1-a")
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cfg, err := ingest.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want := map[Form]string{FormCombined: "combined", FormMappedJSON: "json"}[f]
		if want == "" {
			want = "hotspot"
		}
		if in := cfg.Inputs[0]; len(cfg.Inputs) != 1 || in.Topic != "bench.X_1-a" || in.Format != want {
			t.Errorf("%s: inputs %+v, want one for topic bench.X_1-a, format %s", f, cfg.Inputs, want)
		}
	}
	for _, topic := range []string{"", "a b", `a"`, "x\n  - topic: y", strings.Repeat("t", 250)} {
		if _, err := InputFile(FormCombined, topic); err == nil || !strings.Contains(err.Error(), "not a Kafka topic name") {
			t.Errorf("topic %q: %v, want an error", topic, err)
		}
	}
	if _, err := InputFile(numForms, "t"); err == nil {
		t.Errorf("an unknown form: no error")
	}
}

func TestParseForm(t *testing.T) {
	for f := range numForms {
		if g, err := ParseForm(f.String()); g != f || err != nil {
			t.Errorf("ParseForm(%q) = %v, %v", f, g, err)
		}
	}
	if _, err := ParseForm("xml"); err == nil || !strings.Contains(err.Error(), "binary, json, ndjson, combined, mapped-json") {
		t.Errorf("ParseForm(xml): %v", err)
	}
	for f, want := range map[Form]int{FormNDJSON: 100, FormCombined: 1, FormMappedJSON: 1} {
		if c := testConfig(t, Config{Form: f}); c.Lines != want {
			t.Errorf("%s: Lines %d by default, want %d", f, c.Lines, want)
		}
	}
}
