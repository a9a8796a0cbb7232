package main

import (
	"bytes"
	"encoding/json"
	"github.com/hotspot-dev/hotspot/hotspotapi"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/rules"
)

// TestRulesAndPinsAgainstHotspotd runs hotspot rules, pin, unpin, block and
// unblock against a real hotspotd on the stack.
func TestRulesAndPinsAgainstHotspotd(t *testing.T) {
	h := startHotspotd(t, "--admin-token", "s3cret")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokenFile := write("token", "s3cret\n")
	yamlFile := write("rules.yaml", `
# the shop's rules
rules:
  - match: prefix
    pattern: "item:"
    threshold: 500
    window: 2s
  - {match: glob, pattern: "session:*", mode: never}
  - match: prefix
    pattern: "feed:"
    mode: topk
    k: 50
`)
	jsonFile := write("rules.json", `{"app":"shop","rules":[{"match":"exact","pattern":"home","measure":"bytes","threshold":1e6}]}`)
	badFile := write("bad.yaml", "rules:\n  - {match: prefix, pattern: \"a:\"}\n  - {match: prefix, pattern: \"b:\", window: 150ms}\n")
	otherApp := write("other.json", `{"app":"web","rules":[]}`)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	withToken := env(map[string]string{"HOTSPOT_ADMIN_TOKEN": "s3cret"})

	steps := []struct {
		name    string
		args    []string
		getenv  func(string) string
		want    string // in the output, or in the error when wantErr
		wantErr bool
	}{
		{"get without rules", []string{"get", "--app", "shop"}, noEnv, "app shop has no rules", false},
		{"set needs the token", []string{"set", "--app", "shop", "-f", yamlFile}, noEnv, "refused the admin token", true},
		{"set YAML, read-modify-write", []string{"set", "--app", "shop", "-f", yamlFile}, withToken, "app shop: 3 rules, version 1", false},
		{"get", []string{"get", "--app", "shop"}, noEnv, `1  glob    "session:*"  never`, false},
		{"set JSON at a stale version", []string{"set", "--app", "shop", "-f", jsonFile, "--version", "0", "--admin-token-file", tokenFile}, noEnv, "changed since version 0", true},
		{"set JSON at the stored version", []string{"set", "--app", "shop", "-f", jsonFile, "--version", "1", "--admin-token-file", tokenFile}, noEnv, "app shop: 1 rule, version 2", false},
		{"a bad rule names its index", []string{"set", "--app", "shop", "-f", badFile}, withToken, "rule 1: window 150ms is not a multiple of 100ms", true},
		{"another app's file", []string{"set", "--app", "shop", "-f", otherApp}, withToken, `list of app "web"`, true},
		{"get JSON", []string{"get", "--app", "shop", "--json"}, noEnv, `"measure": "bytes"`, false},
		{"delete a stale version", []string{"delete", "--app", "shop", "--version", "1"}, withToken, "not at version 1", true},
		{"delete", []string{"delete", "--app", "shop", "--version", "2"}, withToken, "rules deleted", false},
		{"get after delete", []string{"get", "--app", "shop"}, noEnv, "has no rules", false},
		{"delete when none", []string{"delete", "--app", "shop"}, withToken, "rules deleted", false},
		{"no verb", []string{"--app", "shop"}, noEnv, "want get, set or delete", true},
		{"no app", []string{"get"}, noEnv, "--app is required", true},
		{"set without a file", []string{"set", "--app", "shop"}, withToken, "-f FILE is required", true},
	}
	for _, s := range steps {
		var out bytes.Buffer
		err := rulesCmd(t.Context(), append(s.args, "--hotspotd", h.addr), s.getenv, strings.NewReader(""), &out)
		got := out.String()
		if err != nil {
			got = err.Error()
		}
		if (err != nil) != s.wantErr || !strings.Contains(got, s.want) {
			t.Errorf("%s: hotspot rules %q = %q (error %v), want %q", s.name, s.args, got, err != nil, s.want)
		}
	}

	// A list the CLI would refuse too, sent as it is: hotspotd's 400
	// names the rule.
	rc, err := apiClient(h.addr, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	_, err = putRules(t.Context(), rc, &rules.List{App: "shop", Rules: []rules.Rule{{Match: rules.Exact, Pattern: "a"}, {Match: rules.Exact}}})
	if err == nil || !strings.Contains(err.Error(), "hotspotd refused the list: rule 1: empty pattern") {
		t.Errorf("put of an empty pattern: %v, want hotspotd refusing rule 1", err)
	}

	// Rules read from stdin reach hotspotd's own watcher.
	var out bytes.Buffer
	if err := rulesCmd(t.Context(), []string{"set", "--app", "shop", "-f", "-", "--hotspotd", h.addr}, withToken,
		strings.NewReader(`{"rules":[{"match":"prefix","pattern":"x:"}]}`), &out); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, h.addr, "hotspot_rules_apps 1")

	for _, s := range []struct {
		cmd, kind string
		args      []string
		getenv    func(string) string
		want      string // the list afterwards, or the error
		wantErr   bool
	}{
		{"pin", "pins", []string{"--app", "shop", "item:1", "item:2"}, withToken, `["item:1","item:2"]`, false},
		{"unpin", "pins", []string{"--app", "shop", "--", "item:1"}, withToken, `["item:2"]`, false},
		{"block", "blocks", []string{"--app", "shop", "--admin-token-file", tokenFile, "item:9"}, noEnv, `["item:9"]`, false},
		{"unblock", "blocks", []string{"--app", "shop", "item:9"}, withToken, `[]`, false},
		{"pin", "pins", []string{"--app", "shop", "--admin-token", "nope", "item:3"}, noEnv, "refused the admin token", true},
		{"pin", "pins", []string{"--app", "shop"}, withToken, "no key given", true},
		{"pin", "pins", []string{"item:1"}, withToken, "--app is required", true},
	} {
		var out bytes.Buffer
		err := pinCmd(t.Context(), s.cmd, hotspotapi.List(s.kind), s.cmd == "pin" || s.cmd == "block", append([]string{"--hotspotd", h.addr}, s.args...), s.getenv, &out)
		switch {
		case s.wantErr:
			if err == nil || !strings.Contains(err.Error(), s.want) {
				t.Errorf("hotspot %s %q = %v, want an error containing %q", s.cmd, s.args, err, s.want)
			}
			continue
		case err != nil:
			t.Errorf("hotspot %s %q: %v", s.cmd, s.args, err)
			continue
		}
		c, err := apiClient(h.addr, "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Keys(t.Context(), hotspotapi.List(s.kind), "shop")
		if err != nil {
			t.Fatal(err)
		}
		if keys, _ := json.Marshal(append([]string{}, got.Keys...)); string(keys) != s.want {
			t.Errorf("after hotspot %s %q: %s %s, want %s", s.cmd, s.args, s.kind, keys, s.want)
		}
	}
}

// waitMetric waits until hotspotd's /metrics has the line want.
func waitMetric(t *testing.T, addr, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), "\n"+want+"\n") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hotspotd's /metrics has no line %q", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRulesFileErrors: a file's errors come out as hotspotd's would, with
// the rule's index.
func TestRulesFileErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want string }{
		{"yaml.yaml", "rules:\n  - {match: prefix, pattern: p, treshold: 5}\n", `rule 0: bad JSON: json: unknown field "treshold"`},
		{"type.json", `{"rules":[{"match":"exact","pattern":"a"},{"match":"exact","pattern":"b","k":"5"}]}`, `rule 1: field "k": want a int`},
		{"list.yaml", "rulez: []\n", "the list: bad JSON"},
		{"notyaml.yaml", "rules: [\n", "not YAML or JSON"},
		{"ok.yaml", "app: shop\nversion: 3\nrules: []\n", ""},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := readRulesFile(p, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
