package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// briefExample is the example file of docs/ingest.md.
const briefExample = `
inputs:
  - topic: web.access              # required; one input per topic
    format: combined
    app: web
    key: "item:{id}"
    extract: {field: path, pattern: '^/item/(?P<id>[0-9]+)$'}
    where: {status: '^2'}
    source_field: remote_addr
  - topic: svc.json
    format: json
    fields: {key: request.uri, app: service, time: ts_ms, bytes: size, op: method, count: n, source: client.ip}
    time: unix_ms
  - topic: regex.logs
    format: regex
    pattern: '^(?P<ip>\S+) (?P<verb>\S+) (?P<uri>\S+)$'
    key: "{uri}"
  - topic: hotspot.access
`

func TestParseExample(t *testing.T) {
	cfg, err := Parse([]byte(briefExample))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range cfg.Inputs {
		got = append(got, in.Topic+":"+in.Format)
	}
	want := "web.access:combined svc.json:json regex.logs:regex hotspot.access:hotspot"
	if strings.Join(got, " ") != want {
		t.Errorf("inputs %v, want %s", got, want)
	}
	// "count: n" is the path n (YAML 1.2), not the boolean false (YAML 1.1).
	if p := cfg.Inputs[1].p; p.countSlot < 0 || p.names[p.countSlot] != "n" {
		t.Errorf("fields.count read as %q, want n", p.names[p.countSlot])
	}
}

func TestParseJSONFile(t *testing.T) {
	_, err := Parse([]byte(`{"inputs":[{"topic":"a","format":"json","fields":{"key":"k"}},{"topic":"b"}]}`))
	if err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inputs.yaml")
	if err := os.WriteFile(path, []byte(briefExample), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path + ".missing"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yml string
		want      []string // substrings of the error, in order
	}{
		{"empty file", ``, []string{"ingest: no inputs"}},
		{"no inputs", `inputs: []`, []string{"ingest: no inputs"}},
		{"not a mapping", `- topic: a`, []string{"line 1: the file must be a mapping"}},
		{"unknown top key", "inputs: [{topic: a}]\noutputs: []", []string{`line 2: unknown key "outputs"`}},
		{"inputs not a list", `inputs: {topic: a}`, []string{"inputs must be a list"}},
		{"bad YAML", "inputs: [", []string{"ingest: yaml:"}},
		{"input not a mapping", `inputs: [a]`, []string{"input 0: line 1: an input must be a mapping"}},
		{"missing topic", `inputs: [{format: json, fields: {key: k}}]`, []string{"input 0: topic: missing"}},
		{"bad topic", `inputs: [{topic: "a b"}]`, []string{`input 0 (topic "a b"): topic: not a Kafka topic name`}},
		{"duplicate topic", "inputs: [{topic: a}, {topic: b}, {topic: a, format: combined}]",
			[]string{`input 2 (topic "a"): topic: "a" is also the topic of input 0`}},
		{"unknown format", `inputs: [{topic: a, format: csv}]`, []string{`input 0 (topic "a"): format: unknown format "csv"`}},
		{"unknown key", "inputs:\n  - topic: a\n    fromat: json", []string{`input 0 (topic "a"): fromat: unknown setting (line 3;`}},
		{"unknown fields key", `inputs: [{topic: a, format: json, fields: {key: k, size: s}}]`, []string{`fields.size: unknown setting`}},
		{"unknown extract key", `inputs: [{topic: a, format: combined, extract: {field: path, regex: x}}]`, []string{`extract.regex: unknown setting`}},
		{"duplicate key", "inputs:\n  - topic: a\n    topic: b", []string{`already defined`}},
		{"wrong type", "inputs:\n  - topic: a\n    format: combined\n    where: [a]", []string{`input 0 (topic "a"): line 4: cannot unmarshal a list into a mapping of field to pattern`}},
		{"hotspot with settings", `inputs: [{topic: a, key: "{k}", time: unix_s, fields: {key: k}}]`,
			[]string{"key: not used by format hotspot", "fields: not used by format hotspot", "time: not used by format hotspot"}},
		{"regex without pattern", `inputs: [{topic: a, format: regex, key: "{x}"}]`, []string{"pattern: missing"}},
		{"bad regex pattern", `inputs: [{topic: a, format: regex, pattern: "(", key: "{x}"}]`, []string{"pattern: error parsing regexp: missing closing )"}},
		{"regex pattern without groups", `inputs: [{topic: a, format: regex, pattern: "a", key: "k"}]`, []string{"pattern: has no named group"}},
		{"pattern for combined", `inputs: [{topic: a, format: combined, pattern: "x"}]`, []string{"pattern: only for format regex"}},
		{"pattern for json", `inputs: [{topic: a, format: json, pattern: "x", fields: {key: k}}]`, []string{"pattern: only for format regex"}},
		{"fields for combined", `inputs: [{topic: a, format: combined, fields: {key: path}}]`, []string{"fields: not used by format combined"}},
		{"template names no group", `inputs: [{topic: a, format: combined, key: "item:{id}"}]`,
			[]string{`input 0 (topic "a"): key: {id} names no group of format combined (it has remote_addr,`}},
		{"template names no regex group", `inputs: [{topic: a, format: regex, pattern: '(?P<u>\S+)', key: "{v}"}]`,
			[]string{`key: {v} names no group of the pattern (it has u)`}},
		{"template syntax", `inputs: [{topic: a, format: combined, key: "{path"}]`, []string{`key: "{" without a closing "}"`}},
		{"template lone brace", `inputs: [{topic: a, format: combined, key: "a}b"}]`, []string{`key: "}" without an opening "{"`}},
		{"empty placeholder", `inputs: [{topic: a, format: combined, key: "{}"}]`, []string{`key: empty placeholder`}},
		{"empty template", `inputs: [{topic: a, format: combined, key: ""}]`, []string{`key: empty template`}},
		{"json without key", `inputs: [{topic: a, format: json}]`, []string{`key: missing (give a key template, or fields.key)`}},
		{"regex without key", `inputs: [{topic: a, format: regex, pattern: '(?P<u>x)'}]`, []string{`key: missing`}},
		{"bad path", `inputs: [{topic: a, format: json, key: "{a..b}"}]`, []string{`key: {a..b}: path "a..b": empty member name`}},
		{"bad path escape", `inputs: [{topic: a, format: json, fields: {key: 'a\'}}]`, []string{`fields.key: a\: path "a\\": ends with "\"`}},
		{"bad time format", `inputs: [{topic: a, format: json, fields: {key: k, time: t}, time: unix_ns}]`, []string{`time: unknown time format "unix_ns"`}},
		{"time without fields.time", `inputs: [{topic: a, format: json, fields: {key: k}, time: unix_s}]`, []string{`time: needs fields.time`}},
		{"fields.time without time", `inputs: [{topic: a, format: json, fields: {key: k, time: t}}]`, []string{`fields.time: needs time`}},
		{"combined time not clf", `inputs: [{topic: a, format: combined, time: unix_s}]`, []string{`time: format combined has only clf`}},
		{"bad where pattern", `inputs: [{topic: a, format: combined, where: {status: "[2"}}]`, []string{`where.status: error parsing regexp`}},
		{"where names no group", `inputs: [{topic: a, format: combined, where: {code: "2"}}]`, []string{`where.code: code names no group of format combined`}},
		{"extract bad pattern", `inputs: [{topic: a, format: combined, key: "{id}", extract: {field: path, pattern: "(?P<id>"}}]`,
			[]string{`input 0 (topic "a"): extract.pattern: error parsing regexp:`}},
		{"extract missing field", `inputs: [{topic: a, format: combined, extract: {pattern: "(?P<id>x)"}}]`, []string{`extract.field: missing`}},
		{"extract missing pattern", `inputs: [{topic: a, format: combined, extract: {field: path}}]`, []string{`extract.pattern: missing`}},
		{"extract without groups", `inputs: [{topic: a, format: combined, extract: {field: path, pattern: "x"}}]`, []string{`extract.pattern: has no named group`}},
		{"extract unused", `inputs: [{topic: a, format: combined, extract: {field: path, pattern: "(?P<id>x)"}}]`,
			[]string{`extract: none of its groups (id) is used by key "{path}"`}},
		{"extract shadows", `inputs: [{topic: a, format: combined, key: "{path}", extract: {field: path, pattern: "(?P<path>x)"}}]`,
			[]string{`extract.pattern: group path has the name of a field of the line`}},
		{"extract field unknown", `inputs: [{topic: a, format: combined, key: "{id}", extract: {field: uri, pattern: "(?P<id>x)"}}]`,
			[]string{`extract.field: uri names no group`}},
		{"empty app", `inputs: [{topic: a, format: combined, app: ""}]`, []string{`app: empty`}},
		{"long app", `inputs: [{topic: a, format: combined, app: "` + strings.Repeat("x", 1025) + `"}]`, []string{`app: longer than 1024 bytes`}},
		{"app_field and fields.app", `inputs: [{topic: a, format: json, app_field: x, fields: {key: k, app: y}}]`, []string{`app_field: given along with fields.app`}},
		{"app_field unknown group", `inputs: [{topic: a, format: combined, app_field: host}]`, []string{`app_field: host names no group`}},
		{"source_field unknown group", `inputs: [{topic: a, format: combined, source_field: client}]`,
			[]string{`input 0 (topic "a"): source_field: client names no group of format combined (it has remote_addr,`}},
		{"source_field unknown regex group", `inputs: [{topic: a, format: regex, pattern: '(?P<u>x)', key: "{u}", source_field: ip}]`,
			[]string{`source_field: ip names no group of the pattern (it has u)`}},
		{"fields.source unknown regex group", `inputs: [{topic: a, format: regex, pattern: '(?P<u>x)', key: "{u}", fields: {source: ip}}]`,
			[]string{`fields.source: ip names no group of the pattern (it has u)`}},
		{"source_field bad path", `inputs: [{topic: a, format: json, fields: {key: k}, source_field: "c..ip"}]`,
			[]string{`source_field: c..ip: path "c..ip": empty member name`}},
		{"empty source_field", `inputs: [{topic: a, format: combined, source_field: ""}]`, []string{`source_field: empty`}},
		{"source_field and fields.source", `inputs: [{topic: a, format: json, source_field: x, fields: {key: k, source: y}}]`,
			[]string{`source_field: given along with fields.source`}},
		{"source_field for hotspot", `inputs: [{topic: a, source_field: src}]`, []string{`source_field: not used by format hotspot`}},
		{"source_field wrong type", "inputs:\n  - topic: a\n    format: combined\n    source_field: [remote_addr]", []string{`cannot unmarshal a list into a string`}},
		{"fields group unknown", `inputs: [{topic: a, format: regex, pattern: '(?P<u>x)', key: "{u}", fields: {count: n}}]`,
			[]string{`fields.count: n names no group of the pattern`}},
		{"fields.key group unknown, said once", `inputs: [{topic: a, format: regex, pattern: '(?P<u>x)', fields: {key: v}}]`,
			[]string{`fields.key: v names no group of the pattern`}},
		{"several problems, several inputs", `inputs: [{topic: a, format: csv}, {topic: b}, {format: json}]`,
			[]string{`input 0 (topic "a"): format: unknown format`, `input 2: topic: missing`, `input 2: key: missing`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yml))
			if err == nil {
				t.Fatalf("Parse succeeded (%d inputs), want an error", len(cfg.Inputs))
			}
			msg := err.Error()
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q\nlacks (in order) %q", msg, w)
				}
				rest = rest[i+len(w):]
			}
			if tc.name == "fields.key group unknown, said once" && strings.Count(msg, "names no group") != 1 {
				t.Errorf("error %q repeats the problem", msg)
			}
		})
	}
}

func TestTemplateBraces(t *testing.T) {
	in := mustInput(t, `inputs: [{topic: a, format: combined, key: "{{{path}}}"}]`)
	r := decode(in, 0, combinedLine)
	if len(r.got) != 1 || r.got[0].Key != "{/item/42}" {
		t.Errorf("got %+v, want key {/item/42}", r.got)
	}
}

func TestZeroInputIsHotspot(t *testing.T) {
	var in Input
	r := decode(&in, 0, `{"key":"k"}`)
	if len(r.got) != 1 || r.got[0].Key != "k" || r.err != nil {
		t.Errorf("got %+v, %v", r.got, r.err)
	}
}
