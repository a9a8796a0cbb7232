package ingest

import (
	"strings"
	"testing"
)

func TestExplain(t *testing.T) {
	cfg, err := Parse([]byte(briefExample))
	if err != nil {
		t.Fatal(err)
	}
	web, svc, rx, hs := &cfg.Inputs[0], &cfg.Inputs[1], &cfg.Inputs[2], &cfg.Inputs[3]
	src := mustInput(t, `inputs: [{topic: a, format: combined, source_field: remote_addr}]`)
	jsrc := mustInput(t, `inputs: [{topic: a, format: json, fields: {key: k, source: c.ip}}]`)
	for _, tc := range []struct {
		name string
		in   *Input
		line string
		want []string // in order
	}{
		{"access", web, combinedLine, []string{
			`input 0: topic "web.access", format combined`, `key "item:{id}"`, `path = "/item/42"`,
			`where status: "200" matches "^2"`, `extract from path: id="42"`,
			`access: key "item:42", app "web", source "127.0.0.1", op read, bytes 2326, count 1, time none in the line`}},
		{"filtered", web, cline("GET", "/item/1", "404", "1"), []string{`where status: "404" does not match "^2"`, "dropped: filtered"}},
		{"unmatched", web, `1.2.3.4 - - [x] "GET / HTTP/1.1" 2000`, []string{"dropped: unmatched:", "expected a space after the status (at byte 36)"}},
		{"extract unmatched", web, cline("GET", "/other", "200", "1"), []string{"dropped: unmatched: extract: the pattern does not match the field path"}},
		{"json", svc, benchJSON, []string{`key "{request.uri}"`, "ts_ms = number 1700000000123",
			`access: key "/item/12345", app "checkout", op read, bytes 5321, count 1, time 1700000000123 (2023-11-14T22:13:20.123Z)`}},
		{"json missing", svc, `{"request":{"uri":"/a"}}`, []string{"ts_ms = (absent)", "dropped: missing_field: time: no value at ts_ms"}},
		{"not json", svc, `{"a":`, []string{"dropped: not_json:", "(at byte 5)"}},
		{"two lines", rx, "1.2.3.4 GET /x\n\n1.2.3.4 GET", []string{`line "1.2.3.4 GET /x"`, `access: key "/x"`, `line "1.2.3.4 GET"`, "dropped: unmatched"}},
		{"blank", rx, " \r", []string{"blank: skipped"}},
		{"hotspot", hs, `{"key":"k","ts":5}`, []string{"format hotspot", `access: key "k", app "default"`, "time 5 (1970-01-01T00:00:00.005Z)"}},
		{"hotspot bad", hs, `{"key":5}`, []string{`dropped: wrong_type: "key" is not a string`}},
		{"zero input", &Input{}, `{"key":"k"}`, []string{"format hotspot", `access: key "k"`}},
		{"hotspot source", hs, `{"key":"k","src":"inst-1"}`, []string{`access: key "k", app "default", source "inst-1", op read`}},
		{"combined source", src, combinedLine, []string{`source from remote_addr, else none`, `remote_addr = "127.0.0.1"`,
			`access: key "/item/42", app "default", source "127.0.0.1", op read, bytes 2326`}},
		{"combined no source", src, strings.Replace(combinedLine, "127.0.0.1", "-", 1), []string{`access: key "/item/42", app "default", op read`}},
		{"source left out", src, strings.Replace(combinedLine, "127.0.0.1", "\xff", 1), []string{
			"source left out (the access is kept): remote_addr: not valid UTF-8", `access: key "/item/42", app "default", op read`}},
		{"json source", jsrc, `{"k":"x","c":{"ip":"10.0.0.1"}}`, []string{`source from c.ip, else none`, `c.ip = "10.0.0.1"`,
			`access: key "x", app "default", source "10.0.0.1"`}},
		{"json source object", jsrc, `{"k":"x","c":{"ip":{}}}`, []string{"source left out (the access is kept): c.ip: the field is an object or array",
			`access: key "x", app "default", op read`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.Explain([]byte(tc.line))
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("Explain:\n%s\nlacks (in order) %q", got, w)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}
