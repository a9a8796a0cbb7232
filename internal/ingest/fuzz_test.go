package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

// nonBlankLines counts the lines of rec that Decode does not skip.
func nonBlankLines(rec []byte) int {
	n := 0
	for l := range bytes.SplitSeq(rec, []byte{'\n'}) {
		if len(bytes.Trim(l, " \t\r")) > 0 {
			n++
		}
	}
	return n
}

// checkDecode decodes rec with in and checks the package's invariants:
// every non-blank line is one access or one onInvalid call (a record of
// none is one call, empty); every access is well formed, its source too;
// the error agrees with the calls. It returns the accesses and reasons.
func checkDecode(t *testing.T, in *Input, maxKeyLen int, rec []byte) ([]access, []Reason) {
	t.Helper()
	var got []access
	var reasons []Reason
	d := in.NewDecoder(maxKeyLen, func(r Reason) {
		if r == 0 || r >= numReasons {
			t.Fatalf("onInvalid(%d)", r)
		}
		reasons = append(reasons, r)
	})
	max := maxKeyLen
	if max <= 0 {
		max = wire.DefaultMaxKeyLen
	}
	err := d.Decode(rec, func(e *wire.Entry) {
		switch {
		case len(e.Key) == 0 || len(e.Key) > max || !utf8.Valid(e.Key):
			t.Fatalf("bad key %q", e.Key)
		case len(e.App) == 0 || len(e.App) > max || !utf8.Valid(e.App):
			t.Fatalf("bad app %q", e.App)
		case len(e.Src) > max || !utf8.Valid(e.Src):
			t.Fatalf("bad source %q", e.Src)
		case e.Count == 0 || e.TS < 0:
			t.Fatalf("bad entry %+v", e)
		}
		got = append(got, copyEntry(e))
	})
	lines := nonBlankLines(rec)
	bad := 0
	for _, r := range reasons {
		if r != ReasonFiltered {
			bad++
		}
	}
	switch {
	case lines == 0 && (len(got) != 0 || len(reasons) != 1 || reasons[0] != ReasonEmpty):
		t.Fatalf("blank record: %d accesses, reasons %v; want one empty", len(got), reasons)
	case lines > 0 && len(got)+len(reasons) != lines:
		t.Fatalf("%d non-blank lines, but %d accesses + %d reasons %v", lines, len(got), len(reasons), reasons)
	case (err == nil) != (bad == 0):
		t.Fatalf("error %v with reasons %v", err, reasons)
	}
	var e *Error
	if err != nil && (!errors.As(err, &e) || e.Skipped != bad || e.Reason == ReasonFiltered) {
		t.Fatalf("error %v (Skipped should be %d)", err, bad)
	}
	return got, reasons
}

var combinedRef = regexp.MustCompile(combinedRE)

// mappedCombined is FuzzCombined's mapped input; the fuzz target also
// decodes with it less its source_field.
const mappedCombined = `
inputs:
  - topic: a
    format: combined
    app_field: remote_user
    source_field: remote_addr
    key: "{method}:{id}{query}"
    extract: {field: path, pattern: '^/(?:item/)?(?P<id>[^/]*)$'}
    where: {status: '^[23]'}
    time: clf
`

func FuzzCombined(f *testing.F) {
	for _, s := range []string{
		combinedLine, benchCombined,
		cline("GET", "/a?", "200", "-"), cline("GET", "/a\\?b?c", "200", "1"),
		`1.2.3.4 - - [x] "GET / HTTP/1.1" 200 0 "a\"b" "c\\"`,
		`1.2.3.4 - - [x] "GET / HTTP/1.1" 200 0 "a\"b" "c\"`,
		`1.2.3.4 - - [x] "GET / HTTP/1.1\" 200 0 "" ""`,
		`1.2.3.4 - - [] "\x16\x03 / x" 999 1 "" ""`,
		"1.2.3.4\v- - [x] \"G / H\" 200 0 \"\" \"\"",
		combinedLine + "\n" + combinedLine + "\r\n\n",
		"",
	} {
		f.Add([]byte(s))
	}
	preset := mustInput(f, `inputs: [{topic: a, format: combined}]`)
	mapped := mustInput(f, mappedCombined)
	noSrc := mustInput(f, strings.Replace(mappedCombined, "    source_field: remote_addr\n", "", 1))
	if noSrc.p.srcSlot >= 0 || mapped.p.srcSlot < 0 {
		f.Fatal("mappedCombined: source_field not found")
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		// The hand-written parser is the RE2 definition, groups included.
		var g combinedSpans
		off, _ := parseCombined(rec, &g)
		want := combinedRef.FindSubmatchIndex(rec)
		switch {
		case (off < 0) != (want != nil):
			t.Fatalf("parseCombined matched=%v (stopped at %d), RE2 matched=%v", off < 0, off, want != nil)
		case want != nil && !slicesEqual(g[:], want[2:]):
			t.Fatalf("groups\n got %v\nwant %v", g[:], want[2:])
		}
		checkDecode(t, preset, 0, rec)
		gotSrc, _ := checkDecode(t, mapped, 16, rec)
		// A source never drops a line: an input that maps one keeps the
		// lines of the same input without it, and changes nothing else.
		gotNo, _ := checkDecode(t, noSrc, 16, rec)
		if len(gotSrc) != len(gotNo) {
			t.Fatalf("%d accesses with a source, %d without", len(gotSrc), len(gotNo))
		}
		for i := range gotNo {
			if a := gotSrc[i]; a.Src != "" && (len(a.Src) > 16 || a.Src == "-") {
				t.Fatalf("source %q kept", a.Src)
			}
			if gotSrc[i].Src = ""; gotSrc[i] != gotNo[i] {
				t.Fatalf("access %d: %+v with a source, %+v without", i, gotSrc[i], gotNo[i])
			}
		}
	})
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fuzzPaths are the paths FuzzJSONScan reads: nested, indexed, escaped.
var fuzzPaths = []string{"a", "a.b", "a.0", "a.1.c", "b", `x\.y`, "k", "0", "e\u00e9"}

func FuzzJSONScan(f *testing.F) {
	for _, s := range []string{
		`{"a":{"b":1},"a":2}`, `{"a":[{"c":1},{"c":"x\u00e9\ud83d\ude00"}],"k":null}`,
		`{"x.y":true,"x":{"y":false},"0":[],"e\u00e9":"\ud800"}`, `{"a":"\"\\\/\b\f\n\r\t"}`,
		`[1]`, `"s"`, `{"a":1e5,"b":-0.5E-3}`, `{"a" : { "b" : [ ] } , "k":"v" }`,
		`{"a":"caf` + "\xff" + `"}`, `{"a":01}`, `{"a":tru}`, `{}`, `{"a":{"b":{"c":{}}}}`,
	} {
		f.Add([]byte(s))
	}
	root := newJNode()
	for i, p := range fuzzPaths {
		segs, err := splitPath(p)
		if err != nil {
			f.Fatal(err)
		}
		root.add(segs, i)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		s := jscan{spans: make([]jspan, len(fuzzPaths))}
		valid, object := s.scan(line, root)
		wantValid := json.Valid(line) && utf8.Valid(line)
		if valid != wantValid {
			t.Fatalf("valid=%v, encoding/json says %v", valid, wantValid)
		}
		if !valid {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		m, isObj := v.(map[string]any)
		if object != isObj {
			t.Fatalf("object=%v, encoding/json decoded a %T", object, v)
		}
		if !isObj {
			return
		}
		for i, p := range fuzzPaths {
			segs, _ := splitPath(p)
			want := jsonAt(m, segs)
			sp := s.spans[i]
			got := val{line[sp.start:sp.end], sp.kind}
			if sp.esc {
				got.b = unescape(nil, got.b)
			}
			if g := renderVal(got); g != want {
				t.Fatalf("path %s: got %s, want %s", p, g, want)
			}
		}
	})
}

// jsonAt renders the value of encoding/json's decoding at path segs, as
// renderVal renders a val.
func jsonAt(v any, segs []string) string {
	for _, s := range segs {
		switch c := v.(type) {
		case map[string]any:
			v = c[s]
		case []any:
			i := arrayIndex(s)
			if i < 0 || i >= len(c) {
				return "absent"
			}
			v = c[i]
		default:
			return "absent"
		}
	}
	switch c := v.(type) {
	case nil:
		return "absent"
	case string:
		return "string " + strconv.Quote(c)
	case json.Number:
		return "number " + string(c)
	case bool:
		return "boolean " + strconv.FormatBool(c)
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

func renderVal(v val) string {
	switch v.k {
	case kAbsent:
		return "absent"
	case kString:
		return "string " + strconv.Quote(string(v.b))
	case kObject, kArray:
		return kindNames[v.k]
	}
	return kindNames[v.k] + " " + string(v.b)
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		benchJSON, `{"k":"a","t":"2023-11-14T22:13:20Z","n":"3","b":"-","o":"PUT","s":"inst-1","c":{"s":"10.0.0.1"}}`,
		`{"k":"a","s":{"x":1},"c":{"s":"\u00e9\u00e9\u00e9\u00e9\u00e9"}}`,
		`{"k":""}` + "\n\n" + `{"k":"x","t":"1999"}`, `{"k":{"x":1}}`, "{\"k\":\"\xff\"}", " \r\n",
	} {
		f.Add([]byte(s))
	}
	in := mustInput(f, `
inputs:
  - topic: a
    format: json
    key: "{k}/{request.uri}"
    fields: {key: k, app: app, time: t, bytes: b, op: o, count: n, source: s}
    time: rfc3339
    where: {status: '^2'}
`)
	loose := mustInput(f, `inputs: [{topic: a, format: json, fields: {key: k, count: n, bytes: b, op: o}, source_field: c.s}]`)
	f.Fuzz(func(t *testing.T, rec []byte) {
		checkDecode(t, in, 0, rec)
		checkDecode(t, loose, 8, rec)
	})
}

func FuzzDecodeRegex(f *testing.F) {
	for _, s := range []string{"1.2.3.4 GET /a 3", "x y", "a b c\nd e f 0\n\n", ""} {
		f.Add([]byte(s))
	}
	in := mustInput(f, `
inputs:
  - topic: a
    format: regex
    pattern: '^(?P<ip>\S+) (?P<verb>\S+) (?P<uri>\S*)(?: (?P<n>\d+))?'
    key: "{uri}"
    app_field: ip
    fields: {op: verb, count: n, bytes: n, source: uri}
`)
	f.Fuzz(func(t *testing.T, rec []byte) {
		checkDecode(t, in, 12, rec)
	})
}

func FuzzDecodeHotspot(f *testing.F) {
	f.Add([]byte(`{"key":"k","app":"a"}`))
	f.Add(wire.AppendBatch(nil, "shop", 1, []wire.KeyCount{{Key: "a", Count: 1}}))
	f.Add([]byte("{\"key\":1}\n{\"key\":\"x\"}"))
	in := mustInput(f, `inputs: [{topic: a}]`)
	f.Fuzz(func(t *testing.T, rec []byte) {
		calls := 0
		d := in.NewDecoder(0, func(r Reason) {
			if r == 0 || r >= numReasons || r >= ReasonUnmatched {
				t.Fatalf("onInvalid(%v) for format hotspot", r)
			}
			calls++
		})
		err := d.Decode(rec, func(*wire.Entry) {})
		var e *Error
		switch {
		case err == nil && calls != 0:
			t.Fatalf("nil error after %d onInvalid calls", calls)
		case err != nil && (!errors.As(err, &e) || e.Skipped != calls):
			t.Fatalf("error %v after %d onInvalid calls", err, calls)
		}
	})
}

func FuzzTime(f *testing.F) {
	for _, s := range []string{
		"2023-11-14T22:13:20Z", "2023-11-14T22:13:20.123456789+05:30", "1970-01-01T00:00:00Z", "2000-02-29T23:59:59-00:00",
		"10/Oct/2000:13:55:36 -0700", "29/feb/2001:00:00:00 +0000", "1700000000", "1700000000.5", "1.7e12", "1e",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		if ms, ok := parseRFC3339(b); ok {
			tm, err := time.Parse(time.RFC3339Nano, s)
			if err != nil || tm.UnixMilli() != ms {
				t.Fatalf("rfc3339 %q: %d, time.Parse says %v, %v", s, ms, tm.UnixMilli(), err)
			}
		} else if isFixedRFC3339(s) {
			if _, err := time.Parse(time.RFC3339Nano, s); err == nil {
				t.Fatalf("rfc3339 %q refused, time.Parse takes it", s)
			}
		}
		const clf = "02/Jan/2006:15:04:05 -0700"
		if ms, ok := parseCLF(b); ok {
			tm, err := time.Parse(clf, s)
			if err != nil || tm.UnixMilli() != ms {
				t.Fatalf("clf %q: %d, time.Parse says %v, %v", s, ms, tm.UnixMilli(), err)
			}
		} else if len(s) == len(clf) && strings.Count(s, ":") == 3 && !strings.ContainsAny(s[22:], ":+-") {
			if tm, err := time.Parse(clf, s); err == nil && s[0] != ' ' && s[12] != ' ' && s[21] != ' ' && offsetOK(s[22:]) {
				t.Fatalf("clf %q refused, time.Parse takes it as %v", s, tm)
			}
		}
		for _, scale := range []int64{1, 1000} {
			ms, ok := parseUnix(b, scale)
			x, err := strconv.ParseFloat(s, 64)
			plain := len(s) > 0 && strings.Trim(s, "0123456789.eE+-") == "" && s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "_")
			if ok && (err != nil || !plain) {
				t.Fatalf("unix %q accepted, ParseFloat: %v", s, err)
			}
			if ok && x < 1e15 && abs(float64(ms)-x*float64(scale)) > 1.5 {
				t.Fatalf("unix %q (scale %d) = %d, want about %f", s, scale, ms, x*float64(scale))
			}
		}
	})
}

// isFixedRFC3339 reports whether s has the fixed-width shape parseRFC3339
// takes (time.Parse also takes some looser forms).
func isFixedRFC3339(s string) bool {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return false
	}
	for _, i := range []int{0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18} {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	rest := s[19:]
	if len(rest) >= 2 && rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		rest = rest[n:]
	}
	return rest == "Z" || len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' && offsetOK(rest[1:3]+rest[4:6])
}

// offsetOK reports whether hhmm is a zone offset parseCLF and parseRFC3339
// take (time.Parse also takes hours up to 24 and minutes up to 60).
func offsetOK(hhmm string) bool {
	if len(hhmm) != 4 {
		return false
	}
	h, err1 := strconv.Atoi(hhmm[:2])
	m, err2 := strconv.Atoi(hhmm[2:])
	return err1 == nil && err2 == nil && h <= 23 && m <= 59
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(briefExample))
	f.Add([]byte(`inputs: [{topic: a, format: json, key: "{a.b}{{", fields: {key: k}}]`))
	f.Add([]byte("inputs:\n  - &x {topic: a}\n  - *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		for i := range cfg.Inputs {
			in := &cfg.Inputs[i]
			checkDecode(t, in, 0, []byte(combinedLine+"\n"+benchJSON))
			_ = in.Explain([]byte(combinedLine))
		}
	})
}
