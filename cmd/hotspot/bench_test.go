package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// hotspotd is one real hotspotd process for the CLI's tests.
type hotspotd struct {
	addr, topic, root string
}

// startHotspotd builds and starts a hotspotd with its own topic, group and
// ZooKeeper root on the real stack, plus the extra flags; the test's cleanup
// stops it with SIGTERM.
func startHotspotd(t *testing.T, extra ...string) hotspotd {
	t.Helper()
	return startHotspotdOn(t, stacktest.Name(t), extra...)
}

// startHotspotdOn is startHotspotd with the topic, group and root named
// name (so that an input file given in extra can name the topic).
func startHotspotdOn(t *testing.T, name string, extra ...string) hotspotd {
	t.Helper()
	if testing.Short() {
		t.Skip("runs hotspotd against the stack; -short skips it")
	}
	brokers, zk := stacktest.Kafka(t), stacktest.ZK(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "hotspotd")
	if out, err := exec.Command("go", "build", "-o", bin, "../hotspotd").CombinedOutput(); err != nil {
		t.Fatalf("go build hotspotd: %v\n%s", err, out)
	}
	h := hotspotd{addr: freeAddr(t), topic: name, root: "/" + name}
	logf, err := os.Create(filepath.Join(dir, "hotspotd.log"))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--brokers", brokers, "--zk", zk, "--topic", h.topic, "--group", name,
		"--zk-root", h.root, "--http-addr", h.addr, "--id", name, "--from-oldest=true"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Killed with the test binary: a test that panics (go test's
	// -timeout) runs no Cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("hotspotd exited: %v", err)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("hotspotd did not stop within 30 s of SIGTERM")
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("hotspotd's log:\n%s", b)
		}
	})
	if err := waitHTTP(t.Context(), "http://"+h.addr+"/readyz", 60*time.Second); err != nil {
		t.Fatalf("hotspotd at %s is not ready: %v", h.addr, err)
	}
	return h
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func noEnv(string) string { return "" }

// TestToolsSayWhenTheyMeasureNothing runs bench, load and hotkeys against a
// real hotspotd that consumes another topic than theirs, and bench against
// one whose keys it misses: each says so, and bench fails.
func TestToolsSayWhenTheyMeasureNothing(t *testing.T) {
	h := startHotspotd(t)
	brokers, zk := stacktest.Kafka(t), stacktest.ZK(t)
	other := h.topic + "-other"
	benchArgs := func(topic string, extra ...string) []string {
		return append([]string{"--brokers", brokers, "--zk", zk, "--zk-root", h.root, "--hotspotd", h.addr,
			"--topic", topic, "--rate", "0", "--duration", "2s", "--settle", "1500ms"}, extra...)
	}
	want := `hotspotd at ` + h.addr + ` consumes topic "` + h.topic + `", not "` + other + `"`

	t.Run("bench to another topic", func(t *testing.T) {
		var out bytes.Buffer
		err := benchCmd(t.Context(), benchArgs(other), noEnv, &out)
		if err == nil || errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "would never reach a detector: "+want) {
			t.Errorf("bench --topic %s: %v, want an error (exit 1) with %q\n%s", other, err, want, out.String())
		}
	})
	t.Run("load to another topic", func(t *testing.T) {
		for _, tc := range []struct {
			topic string
			warns bool
		}{{other, true}, {h.topic, false}} {
			var out bytes.Buffer
			args := []string{"--brokers", brokers, "--hotspotd", h.addr, "--topic", tc.topic, "--rate", "100",
				"--keys", "10", "--duration", "300ms", "--quiet"}
			if err := load(t.Context(), args, noEnv, &out); err != nil {
				t.Fatalf("load --topic %s: %v\n%s", tc.topic, err, out.String())
			}
			if got := strings.Contains(out.String(), "warning: no detector will count this workload: hotspotd at "); got != tc.warns {
				t.Errorf("load --topic %s: warning %v, want %v\n%s", tc.topic, got, tc.warns, out.String())
			}
		}
	})
	t.Run("hotkeys of another topic", func(t *testing.T) {
		for _, tc := range []struct {
			topic string
			warns bool
		}{{other, true}, {h.topic, false}} {
			var out, errOut bytes.Buffer
			if err := hotkeys(t.Context(), []string{"--hotspotd", h.addr, "--topic", tc.topic}, noEnv, &out, &errOut); err != nil {
				t.Fatalf("hotkeys --topic %s: %v", tc.topic, err)
			}
			if got := strings.Contains(errOut.String(), "warning: these hot keys are not those of your topic: hotspotd at "); got != tc.warns {
				t.Errorf("hotkeys --topic %s: warning %v, want %v; stderr %q", tc.topic, got, tc.warns, errOut.String())
			}
			if !strings.Contains(out.String(), "hot keys") {
				t.Errorf("hotkeys --topic %s printed no table: %q", tc.topic, out.String())
			}
		}
	})
	t.Run("bench with missed keys", func(t *testing.T) {
		// Scored against a threshold of 100/s, a key at 2x (200/s) had to
		// be reported; hotspotd's threshold is 1000/s, so it never is.
		// --partitions 3 cannot apply: hotspotd created the topic with its
		// 8 at start, and bench says so.
		args := benchArgs(h.topic, "--threshold", "100", "--planted", "2", "--partitions", "3")
		var out bytes.Buffer
		err := benchCmd(t.Context(), args, noEnv, &out)
		if err == nil || !strings.Contains(err.Error(), "missed 1 of 1 keys that had to be reported") {
			t.Errorf("bench with a missed key: %v, want the missed-keys error\n%s", err, out.String())
		}
		if want := "warning: topic " + h.topic + " has 8 partitions, not the 3 of --partitions"; !strings.Contains(out.String(), want) {
			t.Errorf("bench --partitions 3 on a topic of 8: no %q in\n%s", want, out.String())
		}
		if !strings.Contains(out.String(), "missed ") || strings.Contains(out.String(), "detectors     0 records") {
			t.Errorf("bench report lacks the missed key, or counted nothing:\n%s", out.String())
		}
		out.Reset()
		if err := benchCmd(t.Context(), append(args, "--allow-missed"), noEnv, &out); err != nil {
			t.Errorf("bench --allow-missed: %v, want success\n%s", err, out.String())
		}
	})
}

// TestBenchMeasuredNothing runs bench against a real hotspotd without a
// detector: nothing counts the workload, and bench says so and fails.
func TestBenchMeasuredNothing(t *testing.T) {
	h := startHotspotd(t, "--roles", "aggregator")
	var out bytes.Buffer
	args := []string{"--brokers", stacktest.Kafka(t), "--zk", stacktest.ZK(t), "--zk-root", h.root, "--hotspotd", h.addr,
		"--topic", h.topic, "--rate", "500", "--keys", "100", "--duration", "2s", "--settle", "500ms"}
	err := benchCmd(t.Context(), args, noEnv, &out)
	if err == nil || !strings.Contains(err.Error(), "measured nothing: the workload sent ") ||
		!strings.Contains(err.Error(), "the detectors counted 0 records and 0 entries meanwhile") {
		t.Errorf("bench without a detector: %v, want the measured-nothing error\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "== hotspot bench report ==") {
		t.Errorf("bench printed no report:\n%s", out.String())
	}
}

// TestBenchMappedForms runs bench with each form that hotspotd reads
// through an input file against a real hotspotd started with the file that
// --input-out writes: every key that had to be reported is (bench fails
// otherwise), none falsely, and the file dropped no line.
func TestBenchMappedForms(t *testing.T) {
	for _, form := range []string{"combined", "mapped-json"} {
		t.Run(form, func(t *testing.T) {
			if testing.Short() {
				t.Skip("runs hotspotd against the stack; -short skips it")
			}
			brokers, zk := stacktest.Kafka(t), stacktest.ZK(t)
			name := stacktest.Name(t)
			path := filepath.Join(t.TempDir(), "input.yaml")
			var out bytes.Buffer
			if err := benchCmd(t.Context(), []string{"--form", form, "--topic", name, "--input-out", path}, noEnv, &out); err != nil {
				t.Fatalf("bench --input-out: %v\n%s", err, out.String())
			}
			h := startHotspotdOn(t, name, "--input", path)
			out.Reset()
			args := []string{"--brokers", brokers, "--zk", zk, "--zk-root", h.root, "--hotspotd", h.addr, "--topic", h.topic,
				"--form", form, "--rate", "2000", "--keys", "1000", "--duration", "6s", "--settle", "2s", "--json", filepath.Join(t.TempDir(), "r.json"),
				// A lighter probe than the default (which adds 14,500 events/s
				// with its 10x key): the race detector's generator, sharing
				// two cores with other packages' tests, fell 1.3 s behind on
				// mapped-json at 12,000 events/s in CI.
				"--flash", "planted:0.8x@3s=0.8x", "--flash", "planted:1.2x@3s=1.2x", "--flash", "planted:2x@3s=2x"}
			if err := benchCmd(t.Context(), args, noEnv, &out); err != nil {
				t.Fatalf("bench --form %s: %v\n%s", form, err, out.String())
			}
			t.Logf("bench --form %s:\n%s", form, out.String())
			for _, want := range []string{form + " records", "input file    0 lines dropped", "accuracy      recall 1.000", "precision 1.000"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("bench report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// waitHTTP waits until url answers 200, at most limit.
func waitHTTP(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return last
}
