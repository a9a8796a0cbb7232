package ingest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/wire"
)

const combinedLine = `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /item/42?x=1 HTTP/1.1" 200 2326 "http://example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"`

// clfMs is 10/Oct/2000:13:55:36 -0700 in Unix milliseconds.
const clfMs = 971211336000

func cline(method, target, status, bytes string) string {
	return `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "` + method + " " + target + ` HTTP/1.1" ` + status + " " + bytes + ` "-" "curl/8.0"`
}

type decodeCase struct {
	name    string
	rec     string
	max     int      // maxKeyLen; 0: the default
	want    []access // accesses, in order
	reasons []Reason // onInvalid calls, in order
	errR    Reason   // the Reason of the returned error, 0 for nil
}

func runDecodeCases(t *testing.T, in *Input, cases []decodeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := decode(in, tc.max, tc.rec)
			if !reflect.DeepEqual(r.got, tc.want) {
				t.Errorf("accesses:\n got %+v\nwant %+v", r.got, tc.want)
			}
			if !reflect.DeepEqual(r.reasons, tc.reasons) {
				t.Errorf("onInvalid: got %v, want %v", r.reasons, tc.reasons)
			}
			if got := errReason(r.err); got != tc.errR || (r.err == nil) != (tc.errR == 0) {
				t.Errorf("error: got %v, want reason %v", r.err, tc.errR)
			}
		})
	}
}

func TestDecodeCombined(t *testing.T) {
	in := mustInput(t, `
inputs:
  - topic: web.access
    format: combined
`)
	rd := func(key string, bytes uint64) access {
		return access{App: "default", Key: key, Count: 1, Bytes: bytes}
	}
	long := strings.Repeat("a", 30)
	runDecodeCases(t, in, []decodeCase{
		{name: "apache example", rec: combinedLine, want: []access{rd("/item/42", 2326)}},
		{name: "trailing CR and spaces", rec: "  " + combinedLine + " \r", want: []access{rd("/item/42", 2326)}},
		{name: "three lines, one blank", rec: cline("GET", "/a", "200", "1") + "\n\n" + cline("HEAD", "/b", "304", "-") + "\r\n" + cline("POST", "/c", "201", "0"),
			want: []access{rd("/a", 1), rd("/b", 0), {App: "default", Key: "/c", Count: 1, Op: wire.OpWrite}}},
		{name: "methods", rec: cline("get", "/a", "200", "1") + "\n" + cline("DELETE", "/a", "200", "1") + "\n" + cline("PROPFIND", "/a", "200", "1"),
			want: []access{rd("/a", 1), {App: "default", Key: "/a", Count: 1, Bytes: 1, Op: wire.OpWrite}, {App: "default", Key: "/a", Count: 1, Bytes: 1, Op: wire.OpWrite}}},
		{name: "escaped quote in user agent (Apache)", rec: `1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /x HTTP/1.0" 200 5 "-" "a \"quoted\" agent\\"`, want: []access{rd("/x", 5)}},
		{name: "nginx hex escapes", rec: `1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /caf\xC3\xA9 HTTP/1.1" 200 5 "-" "x"`, want: []access{rd(`/caf\xC3\xA9`, 5)}},
		{name: "empty path is an empty key", rec: cline("GET", "?q=1", "200", "1"), reasons: []Reason{ReasonEmptyKey}, errR: ReasonEmptyKey},
		{name: "key too long", rec: cline("GET", "/"+long, "200", "1"), max: 30, reasons: []Reason{ReasonKeyTooLong}, errR: ReasonKeyTooLong},
		{name: "key of maxKeyLen", rec: cline("GET", "/"+long[1:], "200", "1"), max: 30, want: []access{rd("/"+long[1:], 1)}},
		{name: "invalid UTF-8 key", rec: cline("GET", "/\xff", "200", "1"), reasons: []Reason{ReasonBadUTF8}, errR: ReasonBadUTF8},
		{name: "no request (400)", rec: `1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "-" 400 0 "-" "-"`, reasons: []Reason{ReasonUnmatched}, errR: ReasonUnmatched},
		{name: "extra field after user agent", rec: combinedLine + ` "extra"`, reasons: []Reason{ReasonUnmatched}, errR: ReasonUnmatched},
		{name: "syslog prefix", rec: `<13>Oct 10 13:55:36 web1 nginx: ` + combinedLine, reasons: []Reason{ReasonUnmatched}, errR: ReasonUnmatched},
		{name: "bad line among good", rec: "garbage\n" + combinedLine + "\nmore garbage",
			want: []access{rd("/item/42", 2326)}, reasons: []Reason{ReasonUnmatched, ReasonUnmatched}, errR: ReasonUnmatched},
		{name: "bytes overflow", rec: cline("GET", "/a", "200", "99999999999999999999999"), reasons: []Reason{ReasonBadValue}, errR: ReasonBadValue},
		{name: "empty record", rec: "", reasons: []Reason{ReasonEmpty}, errR: ReasonEmpty},
		{name: "blank record", rec: " \r\n\t\n", reasons: []Reason{ReasonEmpty}, errR: ReasonEmpty},
	})
}

func TestDecodeCombinedMapped(t *testing.T) {
	in := mustInput(t, `
inputs:
  - topic: web.access
    format: combined
    app: web
    key: "item:{id}"
    extract: {field: path, pattern: '^/item/(?P<id>[0-9]+)$'}
    where: {status: '^2', method: '^(GET|POST)$'}
    time: clf
`)
	runDecodeCases(t, in, []decodeCase{
		{name: "match", rec: combinedLine, want: []access{{App: "web", Key: "item:42", Count: 1, TS: clfMs, Bytes: 2326}}},
		{name: "filtered by status", rec: cline("GET", "/item/1", "404", "1"), reasons: []Reason{ReasonFiltered}},
		{name: "filtered by method", rec: cline("HEAD", "/item/1", "200", "1"), reasons: []Reason{ReasonFiltered}},
		{name: "filtered is not an error, others are", rec: cline("GET", "/item/1", "500", "1") + "\n" + cline("GET", "/other", "200", "1"),
			reasons: []Reason{ReasonFiltered, ReasonUnmatched}, errR: ReasonUnmatched},
		{name: "extract does not match", rec: cline("GET", "/item/x", "200", "1"), reasons: []Reason{ReasonUnmatched}, errR: ReasonUnmatched},
		{name: "bad time", rec: strings.Replace(combinedLine, "10/Oct/2000", "10/Foo/2000", 1), reasons: []Reason{ReasonBadTime}, errR: ReasonBadTime},
		{name: "time before 1970", rec: strings.Replace(combinedLine, "10/Oct/2000", "10/Oct/1960", 1), reasons: []Reason{ReasonBadTime}, errR: ReasonBadTime},
	})
}

func TestDecodeCombinedAppField(t *testing.T) {
	in := mustInput(t, `
inputs:
  - topic: web.access
    format: combined
    app_field: remote_user
    key: "{method} {path}?{query}"
`)
	runDecodeCases(t, in, []decodeCase{
		{name: "user as app", rec: combinedLine, want: []access{{App: "frank", Key: "GET /item/42?x=1", Count: 1, Bytes: 2326}}},
		{name: "no query", rec: cline("GET", "/a", "200", "1"), want: []access{{App: "-", Key: "GET /a?", Count: 1, Bytes: 1}}},
		{name: "app too long", max: 4, rec: strings.Replace(combinedLine, `"GET /item/42?x=1`, `"G /`, 1), reasons: []Reason{ReasonAppTooLong}, errR: ReasonAppTooLong},
	})
}

func TestDecodeJSON(t *testing.T) {
	in := mustInput(t, `
inputs:
  - topic: svc.json
    format: json
    fields: {key: request.uri, app: service, time: ts_ms, bytes: size, op: method, count: n}
    time: unix_ms
`)
	a := func(app, key string, ts int64, bytes, count uint64, op wire.Op) access {
		return access{App: app, Key: key, TS: ts, Bytes: bytes, Count: count, Op: op}
	}
	runDecodeCases(t, in, []decodeCase{
		{name: "all fields", rec: `{"ts_ms":1700000000123,"service":"shop","method":"GET","request":{"uri":"/item/1"},"size":512,"n":3}`,
			want: []access{a("shop", "/item/1", 1700000000123, 512, 3, wire.OpRead)}},
		{name: "strings for numbers", rec: `{"ts_ms":"1700000000123","request":{"uri":"/a"},"size":"7","n":"2","method":"post"}`,
			want: []access{a("default", "/a", 1700000000123, 7, 2, wire.OpWrite)}},
		{name: "defaults and nulls", rec: `{"ts_ms":1,"request":{"uri":"/a"},"service":null,"size":null,"n":null,"method":null}`,
			want: []access{a("default", "/a", 1, 0, 1, wire.OpRead)}},
		{name: "escapes unescaped", rec: `{"ts_ms":5,"request":{"uri":"/caf\u00e9\n\ud83d\ude00"},"service":"s\"q"}`,
			want: []access{a(`s"q`, "/café\n😀", 5, 0, 1, wire.OpRead)}},
		{name: "last duplicate wins", rec: `{"ts_ms":5,"request":{"uri":"/a"},"request":{"other":1}}`,
			reasons: []Reason{ReasonMissingField}, errR: ReasonMissingField},
		{name: "number key", rec: `{"ts_ms":5,"request":{"uri":42.5}}`, want: []access{a("default", "42.5", 5, 0, 1, wire.OpRead)}},
		{name: "op words", rec: `{"ts_ms":5,"request":{"uri":"/a"},"method":"WRITE"}` + "\n" + `{"ts_ms":5,"request":{"uri":"/a"},"method":"Head"}`,
			want: []access{a("default", "/a", 5, 0, 1, wire.OpWrite), a("default", "/a", 5, 0, 1, wire.OpRead)}},
		{name: "missing key", rec: `{"ts_ms":5,"request":{}}`, reasons: []Reason{ReasonMissingField}, errR: ReasonMissingField},
		{name: "missing time", rec: `{"request":{"uri":"/a"}}`, reasons: []Reason{ReasonMissingField}, errR: ReasonMissingField},
		{name: "object key", rec: `{"ts_ms":5,"request":{"uri":{}}}`, reasons: []Reason{ReasonWrongType}, errR: ReasonWrongType},
		{name: "empty key", rec: `{"ts_ms":5,"request":{"uri":""}}`, reasons: []Reason{ReasonEmptyKey}, errR: ReasonEmptyKey},
		{name: "bad count", rec: `{"ts_ms":5,"request":{"uri":"/a"},"n":0}` + "\n" + `{"ts_ms":5,"request":{"uri":"/a"},"n":1.5}`,
			reasons: []Reason{ReasonBadCount, ReasonBadCount}, errR: ReasonBadCount},
		{name: "bad time", rec: `{"ts_ms":"soon","request":{"uri":"/a"}}` + "\n" + `{"ts_ms":-5,"request":{"uri":"/a"}}`,
			reasons: []Reason{ReasonBadTime, ReasonBadTime}, errR: ReasonBadTime},
		{name: "bad bytes", rec: `{"ts_ms":5,"request":{"uri":"/a"},"size":-1}`, reasons: []Reason{ReasonBadValue}, errR: ReasonBadValue},
		{name: "bad op", rec: `{"ts_ms":5,"request":{"uri":"/a"},"method":"g e t"}` + "\n" + `{"ts_ms":5,"request":{"uri":"/a"},"method":1}`,
			reasons: []Reason{ReasonBadValue, ReasonBadValue}, errR: ReasonBadValue},
		{name: "not json", rec: `{"ts_ms":5,`, reasons: []Reason{ReasonNotJSON}, errR: ReasonNotJSON},
		{name: "invalid UTF-8", rec: "{\"ts_ms\":5,\"request\":{\"uri\":\"/\xff\"}}", reasons: []Reason{ReasonNotJSON}, errR: ReasonNotJSON},
		{name: "not an object", rec: `[1,2]`, reasons: []Reason{ReasonWrongType}, errR: ReasonWrongType},
		{name: "trailing data", rec: `{"ts_ms":5,"request":{"uri":"/a"}} x`, reasons: []Reason{ReasonNotJSON}, errR: ReasonNotJSON},
	})
}

func TestDecodeJSONTemplate(t *testing.T) {
	in := mustInput(t, `
inputs:
  - topic: svc.json
    format: json
    app: fallback
    app_field: '@meta.app'
    key: "{key}/{items.1.id}/{a\\.b}"
    fields: {key: k}
    where: {status: '^2', 'http.method': '^GET$'}
`)
	runDecodeCases(t, in, []decodeCase{
		{name: "paths", rec: `{"k":"x","items":[{"id":1},{"id":"two"}],"a.b":true,"status":200,"http":{"method":"GET"},"@meta":{"app":"m"}}`,
			want: []access{{App: "m", Key: "x/two/true", Count: 1}}},
		{name: "app fallback", rec: `{"k":"x","items":[0,{"id":2}],"a.b":"c","status":"204","http":{"method":"GET"}}`,
			want: []access{{App: "fallback", Key: "x/2/c", Count: 1}}},
		{name: "where on absent field", rec: `{"k":"x","items":[0,{"id":2}],"a.b":"c","http":{"method":"GET"}}`,
			reasons: []Reason{ReasonFiltered}},
		{name: "where on object", rec: `{"k":"x","items":[0,{"id":2}],"a.b":"c","status":{},"http":{"method":"GET"}}`,
			reasons: []Reason{ReasonWrongType}, errR: ReasonWrongType},
		{name: "array index missing", rec: `{"k":"x","items":[0],"a.b":"c","status":"200","http":{"method":"GET"}}`,
			reasons: []Reason{ReasonMissingField}, errR: ReasonMissingField},
	})
}

func TestDecodeRegex(t *testing.T) {
	in := mustInput(t, `
inputs:
  - topic: regex.logs
    format: regex
    pattern: '^(?P<ip>\S+) (?P<verb>\S+) (?P<uri>\S+)(?: (?P<n>\d+))?(?: (?P<ts>\S+))?$'
    key: "{uri}"
    fields: {op: verb, count: n, time: ts, app: ip}
    time: rfc3339
`)
	runDecodeCases(t, in, []decodeCase{
		{name: "minimal", rec: "1.2.3.4 GET /a", reasons: []Reason{ReasonBadTime}, errR: ReasonBadTime},
		{name: "full", rec: "1.2.3.4 PUT /a 3 2023-11-14T22:13:20.5+01:00",
			want: []access{{App: "1.2.3.4", Key: "/a", Count: 3, TS: 1699996400500, Op: wire.OpWrite}}},
		{name: "unmatched", rec: "1.2.3.4 GET", reasons: []Reason{ReasonUnmatched}, errR: ReasonUnmatched},
		{name: "bad count", rec: "1.2.3.4 GET /a 0 2023-11-14T22:13:20Z", reasons: []Reason{ReasonBadCount}, errR: ReasonBadCount},
	})
}

func TestDecodeHotspot(t *testing.T) {
	cfg, err := Parse([]byte("inputs: [{topic: hotspot.access}]"))
	if err != nil {
		t.Fatal(err)
	}
	in := &cfg.Inputs[0]
	if in.Format != "hotspot" {
		t.Errorf("Format = %q, want hotspot", in.Format)
	}
	batch := wire.AppendBatch(nil, "shop", 1700000000000, []wire.KeyCount{{Key: "a", Count: 2}, {Key: "b", Count: 1}})
	for _, in := range []*Input{in, {}, nil} {
		runDecodeCases(t, in, []decodeCase{
			{name: "json", rec: `{"key":"k","app":"a","count":2,"op":"write"}`, want: []access{{App: "a", Key: "k", Count: 2, Op: wire.OpWrite}}},
			{name: "batch", rec: string(batch), want: []access{{App: "shop", Key: "a", Count: 2, TS: 1700000000000}, {App: "shop", Key: "b", Count: 1, TS: 1700000000000}}},
			{name: "wire reasons pass through", rec: `{"app":"a"}` + "\n" + `{"key":""}`, reasons: []Reason{ReasonMissingKey, ReasonEmptyKey}, errR: ReasonMissingKey},
			{name: "key too long", max: 2, rec: `{"key":"abc"}`, reasons: []Reason{ReasonKeyTooLong}, errR: ReasonKeyTooLong},
			{name: "bad magic", rec: "\x01", reasons: []Reason{ReasonBadMagic}, errR: ReasonBadMagic},
			{name: "empty", rec: "", reasons: []Reason{ReasonEmpty}, errR: ReasonEmpty},
		})
	}
}

func TestErrorDetail(t *testing.T) {
	in := mustInput(t, "inputs: [{topic: t, format: combined}]")
	r := decode(in, 0, "ok\n"+combinedLine+"\n"+`1.2.3.4 - - [x] "GET`)
	var e *Error
	if !errors.As(r.err, &e) {
		t.Fatalf("error %v is not an *Error", r.err)
	}
	want := `ingest: unmatched at byte 2: the line is not in format combined: expected a space (2 bad lines)`
	if got := e.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestReasons(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons() {
		s := r.String()
		if s == "" || strings.HasPrefix(s, "reason(") || seen[s] {
			t.Errorf("reason %d: bad or duplicate name %q", r, s)
		}
		seen[s] = true
	}
	for _, wr := range wire.Reasons() {
		if got := fromWire(wr); got.String() != wr.String() {
			t.Errorf("wire reason %v maps to %v: add it to this package's reasons", wr, got)
		}
	}
	if got := Reason(0).String(); got != "reason(0)" {
		t.Errorf("Reason(0) = %q", got)
	}
}

func TestDecodeSourceCombined(t *testing.T) {
	in := mustInput(t, `
inputs:
  - topic: web.access
    format: combined
    source_field: remote_addr
`)
	rd := func(key, src string, bytes uint64) access {
		return access{App: "default", Key: key, Count: 1, Bytes: bytes, Src: src}
	}
	long := strings.Repeat("9", 31)
	runDecodeCases(t, in, []decodeCase{
		{name: "address", rec: combinedLine, want: []access{rd("/item/42", "127.0.0.1", 2326)}},
		{name: "one per line", rec: cline("GET", "/a", "200", "1") + "\n" + strings.Replace(cline("GET", "/a", "200", "1"), "10.0.0.1", "10.0.0.2", 1),
			want: []access{rd("/a", "10.0.0.1", 1), rd("/a", "10.0.0.2", 1)}},
		{name: "dash is none", rec: strings.Replace(combinedLine, "127.0.0.1", "-", 1), want: []access{rd("/item/42", "", 2326)}},
		{name: "IPv6", rec: strings.Replace(combinedLine, "127.0.0.1", "2001:db8::1", 1), want: []access{rd("/item/42", "2001:db8::1", 2326)}},
		{name: "source of maxKeyLen", max: 31, rec: strings.Replace(combinedLine, "127.0.0.1", long, 1), want: []access{rd("/item/42", long, 2326)}},
		{name: "too long: left out, access kept", max: 30, rec: strings.Replace(combinedLine, "127.0.0.1", long, 1), want: []access{rd("/item/42", "", 2326)}},
		{name: "invalid UTF-8: left out, access kept", rec: strings.Replace(combinedLine, "127.0.0.1", "10.\xff", 1), want: []access{rd("/item/42", "", 2326)}},
		{name: "the line's other problems still drop it", rec: cline("GET", "/\xff", "200", "1"), reasons: []Reason{ReasonBadUTF8}, errR: ReasonBadUTF8},
	})
	// Another group: remote_user, whose "-" means none.
	in = mustInput(t, `inputs: [{topic: a, format: combined, source_field: remote_user, app: web}]`)
	runDecodeCases(t, in, []decodeCase{
		{name: "user", rec: combinedLine, want: []access{{App: "web", Key: "/item/42", Count: 1, Bytes: 2326, Src: "frank"}}},
		{name: "no user", rec: cline("GET", "/a", "200", "1"), want: []access{{App: "web", Key: "/a", Count: 1, Bytes: 1}}},
	})
}

func TestDecodeSourceJSON(t *testing.T) {
	for _, yml := range []string{
		`inputs: [{topic: a, format: json, app: s, fields: {key: k, source: client.id}}]`,
		`inputs: [{topic: a, format: json, app: s, fields: {key: k}, source_field: client.id}]`,
	} {
		in := mustInput(t, yml)
		a := func(src string) []access { return []access{{App: "s", Key: "x", Count: 1, Src: src}} }
		runDecodeCases(t, in, []decodeCase{
			{name: "string", rec: `{"k":"x","client":{"id":"inst-3"}}`, want: a("inst-3")},
			{name: "escaped", rec: `{"k":"x","client":{"id":"inst\u002d\u00e9\"q"}}`, want: a(`inst-é"q`)},
			{name: "number", rec: `{"k":"x","client":{"id":42}}`, want: a("42")},
			{name: "boolean", rec: `{"k":"x","client":{"id":true}}`, want: a("true")},
			{name: "absent", rec: `{"k":"x"}`, want: a("")},
			{name: "null", rec: `{"k":"x","client":{"id":null}}`, want: a("")},
			{name: "empty string", rec: `{"k":"x","client":{"id":""}}`, want: a("")},
			{name: "object: left out", rec: `{"k":"x","client":{"id":{"a":1}}}`, want: a("")},
			{name: "array: left out", rec: `{"k":"x","client":{"id":[1]}}`, want: a("")},
			{name: "of maxKeyLen", max: 6, rec: `{"k":"x","client":{"id":"inst-3"}}`, want: a("inst-3")},
			{name: "too long: left out", max: 5, rec: `{"k":"x","client":{"id":"inst-3"}}`, want: a("")},
			{name: "escaped, of maxKeyLen once unescaped", max: 6, rec: `{"k":"x","client":{"id":"inst\u002d3"}}`, want: a("inst-3")},
			{name: "several lines", rec: `{"k":"x","client":{"id":"a"}}` + "\n" + `{"k":"x"}` + "\n" + `{"k":"x","client":{"id":"b"}}`,
				want: []access{a("a")[0], a("")[0], a("b")[0]}},
			{name: "bad line dropped as before", rec: `{"client":{"id":"a"}}`, reasons: []Reason{ReasonMissingField}, errR: ReasonMissingField},
		})
	}
	// The source's name stands for its path in the key template, as the
	// other fields' names do.
	in := mustInput(t, `inputs: [{topic: a, format: json, key: "{k}@{source}", fields: {key: k, source: c.ip}}]`)
	runDecodeCases(t, in, []decodeCase{
		{name: "template", rec: `{"k":"x","c":{"ip":"10.0.0.1"}}`, want: []access{{App: "default", Key: "x@10.0.0.1", Count: 1, Src: "10.0.0.1"}}},
	})
}

func TestDecodeSourceRegex(t *testing.T) {
	for _, yml := range []string{
		`inputs: [{topic: a, format: regex, pattern: '^(?:(?P<ip>\S+) )?(?P<uri>/\S*)$', key: "{uri}", source_field: ip}]`,
		`inputs: [{topic: a, format: regex, pattern: '^(?:(?P<ip>\S+) )?(?P<uri>/\S*)$', key: "{uri}", fields: {source: ip}}]`,
	} {
		in := mustInput(t, yml)
		runDecodeCases(t, in, []decodeCase{
			{name: "group", rec: "10.0.0.7 /a", want: []access{{App: "default", Key: "/a", Count: 1, Src: "10.0.0.7"}}},
			{name: "group not taking part", rec: "/a", want: []access{{App: "default", Key: "/a", Count: 1}}},
			{name: "dash is a source here", rec: "- /a", want: []access{{App: "default", Key: "/a", Count: 1, Src: "-"}}},
		})
	}
}

func TestDecodeSourceHotspot(t *testing.T) {
	in := mustInput(t, "inputs: [{topic: hotspot.access}]")
	batch := wire.AppendAccessesFrom(nil, "shop", "inst-1", 1700000000000, []wire.Access{{Key: "a", Count: 2}, {Key: "b", Count: 1, Op: wire.OpWrite}})
	runDecodeCases(t, in, []decodeCase{
		{name: "json", rec: `{"key":"k","src":"inst-0"}`, want: []access{{App: "default", Key: "k", Count: 1, Src: "inst-0"}}},
		{name: "batch version 3", rec: string(batch), want: []access{
			{App: "shop", Key: "a", Count: 2, TS: 1700000000000, Src: "inst-1"},
			{App: "shop", Key: "b", Count: 1, TS: 1700000000000, Op: wire.OpWrite, Src: "inst-1"}}},
		{name: "wire's rule: too long drops", max: 3, rec: `{"key":"k","src":"inst-0"}`, reasons: []Reason{ReasonBadValue}, errR: ReasonBadValue},
	})
}

// TestDecodeAllocs: decoding a combined or json line that maps a source
// allocates nothing once the Decoder's buffers have grown, escaped strings
// included.
func TestDecodeAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	for _, tc := range []struct {
		name, yml, rec string
	}{
		{"combined", `inputs: [{topic: a, format: combined, source_field: remote_addr}]`, benchCombined},
		{"combined template+where+clf", `inputs: [{topic: a, format: combined, app: web, key: "{method}:{path}", where: {status: '^2'}, time: clf, source_field: remote_addr}]`,
			benchCombined + "\n" + benchCombined},
		{"json", `inputs: [{topic: a, format: json, fields: {key: request.uri, app: service, time: ts_ms, bytes: size, op: method, count: n, source: trace}, time: unix_ms}]`,
			benchJSON},
		{"json escaped", `inputs: [{topic: a, format: json, fields: {key: k, source: s}}]`, `{"k":"caf\u00e9","s":"inst\u002d1\n"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := mustInput(t, tc.yml)
			d := in.NewDecoder(0, func(r Reason) { t.Fatalf("dropped: %v", r) })
			v := []byte(tc.rec)
			var srcs int
			fn := func(e *wire.Entry) {
				if len(e.Src) > 0 {
					srcs++
				}
			}
			if err := d.Decode(v, fn); err != nil || srcs == 0 {
				t.Fatalf("Decode: %v, %d sources", err, srcs)
			}
			if n := testing.AllocsPerRun(200, func() { _ = d.Decode(v, fn) }); n != 0 {
				t.Errorf("%v allocations per record, want 0", n)
			}
		})
	}
}
