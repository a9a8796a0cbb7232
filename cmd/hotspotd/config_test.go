package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(config) bool
		wantErr string
	}{
		{"defaults", nil, nil, func(c config) bool {
			return c.detector && c.aggregator && c.threshold == 1000 && c.window == time.Second &&
				c.topic == "hotspot.access" && c.zkRoot == "/hotspot" && c.adminToken == ""
		}, ""},
		{"environment", nil, map[string]string{"HOTSPOT_ROLES": "aggregator", "HOTSPOT_THRESHOLD": "500", "HOTSPOT_ADMIN_TOKEN": "t0k"},
			func(c config) bool { return !c.detector && c.aggregator && c.threshold == 500 && c.adminToken == "t0k" }, ""},
		{"flag beats environment", []string{"--threshold", "2000", "--admin-token", "flag"},
			map[string]string{"HOTSPOT_THRESHOLD": "500", "HOTSPOT_ADMIN_TOKEN": "env"},
			func(c config) bool { return c.threshold == 2000 && c.adminToken == "flag" }, ""},
		{"advertise defaults to the listen address", []string{"--http-addr", "127.0.0.1:9000"}, nil,
			func(c config) bool { return c.advertise == "127.0.0.1:9000" && strings.HasSuffix(c.id, "-9000") }, ""},
		{"history defaults", nil, nil, func(c config) bool {
			return c.redis == "127.0.0.1:16379" && c.historyMaxLen == 100_000 && c.historyRetention == 7*24*time.Hour
		}, ""},
		{"history from the environment", []string{"--history-retention", "0"}, map[string]string{"HOTSPOT_REDIS": "redis://h:6379/2", "HOTSPOT_HISTORY_MAXLEN": "500"},
			func(c config) bool {
				return c.redis == "redis://h:6379/2" && c.historyMaxLen == 500 && c.historyRetention == 0
			}, ""},
		{"history length not positive", []string{"--history-maxlen", "0"}, nil, nil, "not a positive integer"},
		{"negative retention", []string{"--history-retention", "-1h"}, nil, nil, "must be >= 0"},
		{"replication factor: the brokers' default unless set", nil, map[string]string{}, func(c config) bool { return c.replicas == 0 }, ""},
		{"replication factor from the environment", nil, map[string]string{"HOTSPOT_REPLICATION_FACTOR": "3"},
			func(c config) bool { return c.replicas == 3 }, ""},
		{"negative replication factor", []string{"--replication-factor", "-1"}, nil, nil, "--replication-factor: -1 must be >= 0"},
		{"negative commit interval", []string{"--commit-interval", "-1s"}, nil, nil, "--commit-interval: -1s must be >= 0"},
		{"unknown role", []string{"--roles", "both"}, nil, nil, `unknown role "both"`},
		{"no role", []string{"--roles", ","}, nil, nil, "at least one of"},
		{"window not in 100ms steps", []string{"--window", "250ms"}, nil, nil, "multiple of 100ms"},
		{"threshold not positive", []string{"--threshold", "0"}, nil, nil, "not a positive number"},
		{"default rule", []string{"--threshold", "50", "--window", "2s", "--hold", "5s", "--low-mark", "0.5"}, nil, func(c config) bool {
			d := c.defaultRule()
			return d.Index == -1 && d.Mode == "threshold" && d.Measure == "count" && d.Ops == "read" &&
				d.Threshold == 50 && d.Window == 2*time.Second && d.Hold == 5*time.Second && d.Low == 0.5
		}, ""},
		{"hold and low mark defaults", nil, nil, func(c config) bool { return c.hold == 2*time.Second && c.lowMark == 0.8 }, ""},
		{"hold not positive", []string{"--hold", "0s"}, nil, nil, "--hold: 0s out of range"},
		{"low mark above 1", []string{"--low-mark", "1.5"}, nil, nil, "--low-mark: 1.5 out of range"},
		{"low mark zero", nil, map[string]string{"HOTSPOT_LOW_MARK": "0"}, nil, "--low-mark: 0 out of range"},
		{"filter loss default", nil, nil, func(c config) bool { return c.filterLoss == 0.05 }, ""},
		{"filter loss from the environment", nil, map[string]string{"HOTSPOT_FILTER_LOSS": "0.1"},
			func(c config) bool { return c.filterLoss == 0.1 }, ""},
		{"no filter", []string{"--filter-loss", "-1"}, nil, func(c config) bool { return c.filterLoss == -1 }, ""},
		{"filter loss zero", []string{"--filter-loss", "0"}, nil, nil, "--filter-loss: 0 out of range"},
		{"filter loss of the whole threshold", []string{"--filter-loss", "1"}, nil, nil, "--filter-loss: 1 out of range"},
		{"aggregator bound default", nil, nil, func(c config) bool { return c.aggMaxMiB == 128 }, ""},
		{"aggregator bound from the environment", nil, map[string]string{"HOTSPOT_AGGREGATOR_MAX_MIB": "512"},
			func(c config) bool { return c.aggMaxMiB == 512 }, ""},
		{"aggregator bound zero", []string{"--aggregator-max-mib", "0"}, nil, nil, "--aggregator-max-mib: 0 out of range"},
		{"aggregator bound past int64 bytes", []string{"--aggregator-max-mib", "9000000000000"}, nil, nil, "out of range"},
		{"relative root", []string{"--zk-root", "hotspot"}, nil, nil, "absolute znode path"},
		{"stray argument", []string{"detector"}, nil, nil, "unexpected argument"},
	}
	for _, tt := range tests {
		c, err := parseConfig(tt.args, env(tt.env))
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: err = %v, want one containing %q", tt.name, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: err = %v", tt.name, err)
		case tt.check != nil && !tt.check(c):
			t.Errorf("%s: got %+v", tt.name, c)
		}
	}
}

// TestConfigInput: --input (or HOTSPOT_INPUT) replaces --topic with the
// file's topics; --topic, if given too, must be one of them; a bad file is
// refused naming the input and the field.
func TestConfigInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("inputs:\n  - topic: web.access\n    format: combined\n  - topic: hotspot.access\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("inputs:\n  - topic: web.access\n    format: combined\n    key: \"{nope}\"\n"), 0o644)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := parseConfig([]string{"--input", good}, env(nil))
	if err != nil || strings.Join(c.topics(), ",") != "web.access,hotspot.access" || c.topic != "web.access" {
		t.Errorf("--input: topics %v (topic %q), %v; want the file's", c.topics(), c.topic, err)
	}
	if c, err := parseConfig(nil, env(map[string]string{"HOTSPOT_INPUT": good, "HOTSPOT_TOPIC": "hotspot.access"})); err != nil || c.inputs == nil {
		t.Errorf("HOTSPOT_INPUT with one of its topics: %v", err)
	}
	if c, err := parseConfig(nil, env(nil)); err != nil || c.inputs != nil || strings.Join(c.topics(), ",") != "hotspot.access" {
		t.Errorf("no --input: topics %v, %v; want hotspot.access alone", c.topics(), err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input", good, "--topic", "other"}, `--topic "other" is not one of the --input file's topics (web.access, hotspot.access)`},
		{[]string{"--input", bad}, `input 0 (topic "web.access"): key: {nope} names no group`},
		{[]string{"--input", filepath.Join(dir, "missing.yaml")}, "--input:"},
	} {
		if _, err := parseConfig(tc.args, env(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
