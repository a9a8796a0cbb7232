package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

func TestDispatch(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{nil, 2, "", "usage: hotspot <command>"},
		{[]string{"help"}, 0, "load ", ""},
		{[]string{"nope"}, 2, "", `unknown command "nope"`},
		{[]string{"load", "--bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"load", "--skew", "-1"}, 2, "", "Skew -1 must be > 0"},
		{[]string{"load", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"load", "--form", "xml"}, 2, "", "unknown record form"},
	} {
		var stdout, stderr bytes.Buffer
		code := dispatch(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.err) {
			t.Errorf("hotspot %q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				tc.args, code, stdout.String(), stderr.String(), tc.code, tc.out, tc.err)
		}
	}
}

// TestLoadEnv checks that flags come from HOTSPOT_* variables and that the
// command line wins, without a broker: the run stops at the broker check.
func TestLoadEnv(t *testing.T) {
	env := map[string]string{"HOTSPOT_SKEW": "-1", "HOTSPOT_BROKERS": "127.0.0.1:1"}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer

	err := load(t.Context(), nil, getenv, &out)
	if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "Skew") {
		t.Errorf("HOTSPOT_SKEW=-1: %v, want a usage error about Skew", err)
	}
	err = load(t.Context(), []string{"--skew", "0.8"}, getenv, &out)
	if !errors.Is(err, kafkaio.ErrNoBroker) || !strings.Contains(err.Error(), "no broker answers at 127.0.0.1:1: start the stack with `make up`") {
		t.Errorf("--skew over HOTSPOT_SKEW, HOTSPOT_BROKERS=127.0.0.1:1: %v, want the no-broker error", err)
	}
	out.Reset()
	if err := load(t.Context(), []string{"--help"}, getenv, &out); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "--brokers string   [HOTSPOT_BROKERS]") {
		t.Errorf("--help: %v, output %q; want flag.ErrHelp and the flags with their variables", err, out.String())
	}
}

// TestLoadInputOut checks --input-out: load and bench write the input file
// of --form and --topic (to a file, or stdout with -) and produce nothing
// (no broker answers here); a key that the form cannot carry is a usage
// error.
func TestLoadInputOut(t *testing.T) {
	env := func(k string) string { return map[string]string{"HOTSPOT_BROKERS": "127.0.0.1:1"}[k] }
	for _, form := range []loadgen.Form{loadgen.FormCombined, loadgen.FormMappedJSON, loadgen.FormBinary} {
		want, err := loadgen.InputFile(form, "access.x")
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := load(t.Context(), []string{"--form", form.String(), "--topic", "access.x", "--input-out", "-"}, env, &out); err != nil || out.String() != string(want) {
			t.Errorf("load --form %s --input-out -: %v, output %q; want %q", form, err, out.String(), want)
		}
		path := filepath.Join(t.TempDir(), "in.yaml")
		out.Reset()
		if err := benchCmd(t.Context(), []string{"--form", form.String(), "--topic", "access.x", "--input-out", path}, env, &out); err != nil {
			t.Fatalf("bench --input-out: %v\n%s", err, out.String())
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != string(want) || !strings.Contains(out.String(), "start hotspotd with --input "+path) {
			t.Errorf("bench --form %s --input-out FILE: %v, file %q, output %q; want %q", form, err, b, out.String(), want)
		}
	}
	var out bytes.Buffer
	err := load(t.Context(), []string{"--form", "combined", "--flash", "shop/q?x@0s=5", "--input-out", "-"}, env, &out)
	if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), `form combined cannot carry the key "q?x"`) {
		t.Errorf("load --form combined with a key holding '?': %v, want a usage error", err)
	}
}

// TestLoadSources checks --sources and --source-skew: the input file of a
// mapped form maps the source, and bad settings are usage errors.
func TestLoadSources(t *testing.T) {
	env := func(k string) string { return map[string]string{"HOTSPOT_BROKERS": "127.0.0.1:1"}[k] }
	for _, form := range []loadgen.Form{loadgen.FormCombined, loadgen.FormMappedJSON} {
		want, err := loadgen.Config{Form: form, Topic: "access.x", Sources: 3}.InputFile()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = load(t.Context(), []string{"--form", form.String(), "--topic", "access.x", "--sources", "3", "--input-out", "-"}, env, &out)
		if err != nil || out.String() != string(want) || !strings.Contains(out.String(), "source") {
			t.Errorf("load --form %s --sources 3 --input-out -: %v, output %q; want %q", form, err, out.String(), want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sources", "-1"}, "Sources -1 must be in 0..65536"},
		{[]string{"--source-skew", "1.1"}, "SourceSkew needs Sources > 0"},
		{[]string{"--sources", "3", "--flash", "item@0s=5~inst-3:0.5"}, `no source "inst-3" among the 3`},
		{[]string{"--flash", "item@0s=5~inst-0:0.5"}, "a top source needs Sources > 0"},
		{[]string{"--sources", "3", "--flash", "item@0s=5~inst-0:2"}, "SHARE must be in (0, 1]"},
	} {
		var out bytes.Buffer
		err := load(t.Context(), append(tc.args, "--input-out", "-"), env, &out)
		if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load %q: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
	var out bytes.Buffer
	if err := load(t.Context(), []string{"--help"}, env, &out); !errors.Is(err, flag.ErrHelp) ||
		!strings.Contains(out.String(), "--sources N") || !strings.Contains(out.String(), "~SOURCE:SHARE") {
		t.Errorf("--help: %v, output lacks --sources or ~SOURCE:SHARE:\n%s", err, out.String())
	}
}

// TestLoadKafka runs the command against the real Kafka and reads its truth.
func TestLoadKafka(t *testing.T) {
	addr := stacktest.Kafka(t)
	path := filepath.Join(t.TempDir(), "truth.json")
	var out bytes.Buffer
	args := []string{"--brokers", addr, "--topic", stacktest.Name(t), "--duration", "1200ms", "--rate", "3000",
		"--keys", "1000", "--flash", "shop/item:hot@200ms+200ms=2000~inst-1:50% other@0s=1.5x", "--planted", "0.5,2",
		"--threshold", "400", "--form", "ndjson", "--sources", "4", "--truth", path}
	if err := load(t.Context(), args, func(string) string { return "" }, &out); err != nil {
		t.Fatalf("load: %v\n%s", err, out.String())
	}
	for _, want := range []string{"ndjson records from 4 sources to", "(8 partitions)", "1s  events ", "done: ", "failed 0 records", "written to " + path} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	tr, err := readTruth(path)
	if err != nil {
		t.Fatal(err)
	}
	totals := tr.Totals()
	for ak, want := range map[loadgen.AppKey]uint64{
		{App: "shop", Key: "item:hot"}:     200 + 1600, // ramp 0.2 s to 2000/s, then 0.8 s at 2000/s
		{App: "app0", Key: "other"}:        720,        // 600/s for 1.2 s
		{App: "app0", Key: "planted:0.5x"}: 240,
		{App: "app0", Key: "planted:2x"}:   960,
	} {
		if got := totals[ak]; got != want {
			t.Errorf("truth total of %v = %d, want %d", ak, got, want)
		}
	}
	// inst-1 sends half of item:hot; the other three share the rest.
	if got := tr.SourceCounts("shop", "item:hot"); got["inst-1"] != 900 || tr.DistinctSources("shop", "item:hot") != 4 {
		t.Errorf("item:hot per source %v, want inst-1 at 900 of 1800 and 4 sources", got)
	}
}

// readTruth reads the ground-truth file that load wrote.
func readTruth(path string) (*loadgen.Truth, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tr loadgen.Truth
	if err := json.Unmarshal(b, &tr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &tr, nil
}

// TestLoadReplicationFactor: --replication-factor below 0 is a usage error,
// and one the cluster cannot meet stops the run with an error naming the
// topic before anything is produced.
func TestLoadReplicationFactor(t *testing.T) {
	var out bytes.Buffer
	err := load(t.Context(), []string{"--replication-factor", "-1", "--brokers", "127.0.0.1:1"}, func(string) string { return "" }, &out)
	if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "--replication-factor must be >= 0") {
		t.Errorf("--replication-factor -1: %v, want a usage error", err)
	}
	addr := stacktest.Kafka(t)
	topic := stacktest.Name(t)
	env := map[string]string{"HOTSPOT_REPLICATION_FACTOR": "100"}
	err = load(t.Context(), []string{"--brokers", addr, "--topic", topic, "--duration", "1s", "--hotspotd", ""}, func(k string) string { return env[k] }, &out)
	if err == nil || !strings.Contains(err.Error(), topic) || !strings.Contains(err.Error(), "replication factor 100") {
		t.Errorf("HOTSPOT_REPLICATION_FACTOR=100: %v, want an error naming the topic and the factor", err)
	}
}
