package httpapi

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPageRateFormat runs the page's own rate formatter (the fmt and
// rateFormat lines of page/page.js) in Node.js: every rate reads one way,
// whole numbers with thousands separators.
func TestPageRateFormat(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	src, err := os.ReadFile("page/page.js")
	if err != nil {
		t.Fatal(err)
	}
	var defs []string
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "const rateFormat ") || strings.HasPrefix(line, "const fmt ") {
			defs = append(defs, line)
		}
	}
	if len(defs) != 2 {
		t.Fatalf("page.js: found %d of the 2 lines defining rateFormat and fmt", len(defs))
	}
	tests := []struct {
		rate float64
		want string
	}{
		{0, "0"}, {0.4, "0"}, {93.04, "93"}, {99.6, "100"}, {335, "335"}, {1000, "1,000"},
		{12480.2, "12,480"}, {2500000, "2,500,000"},
	}
	var rates []float64
	for _, tc := range tests {
		rates = append(rates, tc.rate)
	}
	in, _ := json.Marshal(rates)
	script := strings.Join(defs, "\n") + "\nconsole.log(JSON.stringify(" + string(in) + ".map(fmt)));"
	out, err := exec.Command(node, "-e", script).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(tests) {
		t.Fatalf("node printed %q: %v", out, err)
	}
	for i, tc := range tests {
		if got[i] != tc.want {
			t.Errorf("fmt(%v) = %q, want %q", tc.rate, got[i], tc.want)
		}
	}
}

// runPage runs page/page.js in Node.js (no browser: the document, fetch and
// the timer are stubs), then check, and returns what check printed.
func runPage(t *testing.T, check string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	src, err := os.ReadFile("page/page.js")
	if err != nil {
		t.Fatal(err)
	}
	stubs := `const el = { textContent: "", innerHTML: "" };
globalThis.document = { getElementById: () => el, querySelector: () => el };
globalThis.fetch = async () => { throw new Error("offline"); };
globalThis.setInterval = () => 0;
`
	out, err := exec.Command(node, "-e", stubs+string(src)+check).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	return out
}

// TestPageRules runs page/page.js in Node.js (no browser: the document,
// fetch and the timer are stubs) and checks what it shows of the rules: the
// rule behind each hot key, "default" when the answer names none, and each
// app's rule list.
func TestPageRules(t *testing.T) {
	check := `
const list = {app: "shop", version: 3, rules: [
  {match: "prefix", pattern: "item:", threshold: 500, window: "2s"},
  {match: "glob", pattern: "<b>*", mode: "never"},
  {match: "suffix", pattern: ":blob", measure: "bytes", threshold: 1e6}]};
console.log(JSON.stringify({
  labels: [
    ruleLabel({key: "a", rule: 0, kind: "count"}, list),
    ruleLabel({key: "b", rule: 2, kind: "bytes"}, list),
    ruleLabel({key: "c", rule: -1, kind: "count"}, list),
    ruleLabel({key: "d"}, list),
    ruleLabel({key: "e", rule: 7, kind: "write"}, list),
    ruleLabel({key: "f", rule: 0}, null),
  ],
  table: rulesTable(list),
  none: rulesTable({app: "shop", version: 0, rules: []}),
  failed: rulesTable({error: "zk down"}),
}));`
	out := runPage(t, check)
	var got struct {
		Labels              []string
		Table, None, Failed string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	want := []string{"#0 prefix item:", "#2 suffix :blob (bytes)", "default", "default", "#7 (write)", "#0"}
	if strings.Join(got.Labels, "|") != strings.Join(want, "|") {
		t.Errorf("rule labels: got %q, want %q", got.Labels, want)
	}
	for _, frag := range []string{"<td class=\"key\">item:</td>", "<td>500</td><td>2s</td>", "&lt;b&gt;*", "<td>never</td>", "<td>1,000,000</td>", "version 3"} {
		if !strings.Contains(got.Table, frag) {
			t.Errorf("rules table lacks %q:\n%s", frag, got.Table)
		}
	}
	if !strings.Contains(got.None, "every key follows the default rule") || !strings.Contains(got.Failed, "zk down") {
		t.Errorf("empty list %q, failed read %q", got.None, got.Failed)
	}
}

// TestPageSources runs page/page.js in Node.js and checks what it shows of
// a hot key's sources and effect: a stacked bar with a segment per source
// (its share as width, its name on hover), the busiest named beside it with
// the distinct sources, and the L1 badge; a dash for what is not known.
func TestPageSources(t *testing.T) {
	check := `
const st = {app: "shop", key: "item:42", hot: true, rate: 3000, distinct_sources: 1234,
  sources: [{source: "web-1", share: 0.7}, {source: "<b>", share: 0.2}]};
details.set("shop\u0000item:42", {at: Date.now(), st});
console.log(JSON.stringify({
  bar: sourcesBar(st),
  none: sourcesBar({app: "shop", key: "x"}),
  unread: sourcesBar(null),
  badges: [servedBadge(0.934), servedBadge(0.6), servedBadge(0.1), servedBadge(undefined), servedBadge(null)],
  section: appSection("shop", [{key: "item:42", rate: 3000, since: "2026-11-30T15:04:05Z", source: "detected", rule: -1, kind: "count", served_l1: 0.934}], []),
}));`
	out := runPage(t, check)
	var got struct {
		Bar, None, Unread, Section string
		Badges                     []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	for _, frag := range []string{
		"<span class=\"srcbar\" title=\"web-1: 70%\n&lt;b&gt;: 20%\">", // every source on hover, one a line
		`<span style="width:70.0%;background:#2563eb" title="web-1: 70%"></span>`,
		`<span style="width:20.0%;background:#f59e0b" title="&lt;b&gt;: 20%"></span>`,
		`<span class="srcname">web-1 70% · 1,234 sources</span>`,
	} {
		if !strings.Contains(got.Bar, frag) {
			t.Errorf("sources bar lacks %q:\n%s", frag, got.Bar)
		}
	}
	if !strings.Contains(got.None, "–") || !strings.Contains(got.Unread, "–") {
		t.Errorf("no sources: %q, not read yet: %q; want a dash", got.None, got.Unread)
	}
	wantBadges := []string{`class="l1 good"`, `class="l1 fair"`, `class="l1 poor"`, "–", "–"}
	for i, w := range wantBadges {
		if !strings.Contains(got.Badges[i], w) {
			t.Errorf("badge %d = %q, want %q", i, got.Badges[i], w)
		}
	}
	if !strings.Contains(got.Badges[0], ">L1 93%<") {
		t.Errorf("badge of 0.934 = %q, want L1 93%%", got.Badges[0])
	}
	if !strings.Contains(got.Section, `class="l1 good"`) || !strings.Contains(got.Section, `<td class="sources"><span class="srcbar"`) {
		t.Errorf("hot key row lacks its badge or sources bar:\n%s", got.Section)
	}
}

// TestPageInstances runs page/page.js in Node.js and checks its lines per
// app instance: the busiest first as the API answers them, each with its
// hot-key reads, its L1 badge and what went to Redis, was limited and was
// loaded; at most 20, with a note of the rest.
func TestPageInstances(t *testing.T) {
	check := `
const many = Array.from({length: 25}, (_, i) => ({app: "ads", instance: "pod-" + i, l1_hits: 10, l2_reads: 0, source_loads: 0, limited: 0, served_l1: 1}));
instances = new Map([["shop", [
  {app: "shop", instance: "proxy-<a>", l1_hits: 9000, l2_reads: 800, source_loads: 0, limited: 200, served_l1: 0.9},
  {app: "shop", instance: "web-1", l1_hits: 0, l2_reads: 0, source_loads: 2, limited: 0}]]]);
console.log(JSON.stringify({
  table: instancesTable(instances.get("shop")),
  none: instancesTable(undefined),
  many: instancesTable(many),
  section: appSection("shop", [], []),
}));`
	out := runPage(t, check)
	var got struct{ Table, None, Many, Section string }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	row := `<tr><td class="key">proxy-&lt;a&gt;</td><td class="num">10,000</td><td><span class="l1 good" title="reads answered from its own memory (L1), last 10 s">L1 90%</span></td><td class="num">800</td><td class="num">200</td><td class="num">0</td></tr>`
	if !strings.Contains(got.Table, row) {
		t.Errorf("instances table lacks\n%s\nin\n%s", row, got.Table)
	}
	if i, j := strings.Index(got.Table, "proxy-"), strings.Index(got.Table, "web-1"); i < 0 || j < i || !strings.Contains(got.Table[j:], "–") {
		t.Errorf("web-1 (no reads) not after proxy-<a> with a dash for its badge:\n%s", got.Table)
	}
	if !strings.Contains(got.None, "none reported") {
		t.Errorf("no instances: %q", got.None)
	}
	if n := strings.Count(got.Many, "<tr><td"); n != 20 || !strings.Contains(got.Many, "and 5 more") {
		t.Errorf("25 instances: %d rows shown, note %q; want 20 and 5 more", n, got.Many)
	}
	if !strings.Contains(got.Section, "Instances serving its hot keys (2)") || !strings.Contains(got.Section, row) {
		t.Errorf("app section lacks its instances:\n%s", got.Section)
	}
}
