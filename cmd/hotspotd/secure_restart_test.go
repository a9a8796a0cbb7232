package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestSecureBrokerRestart is TestFaultBrokerRestart on the secured stack
// (TLS, SASL/SCRAM): its broker stops with SIGTERM, stays away 5 s and
// comes back with `stack.sh up --secure`; a key that turns hot at 2x as soon
// as that returns is listed by both hotspotd within brokerRestartTarget.
func TestSecureBrokerRestart(t *testing.T) {
	s := needSecureStack(t)
	name := stacktest.Name(t)
	dir := t.TempDir()
	run := secureRun{s: s, bin: filepath.Join(dir, "hotspotd"), dir: dir, topic: name, group: name, root: "/" + name,
		tokenFile: filepath.Join(dir, "admin.token")}
	if out, err := exec.Command("go", "build", "-o", run.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	os.WriteFile(run.tokenFile, []byte("secure-admin-token\n"), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := kafkaio.EnsureTopicWith(ctx, s.kafkaSec, []string{s.kafka}, run.topic, 4); err != nil {
		t.Fatal(err)
	}
	writer := dialZK(t, s.zk, s.zkWriter)
	t.Cleanup(func() { deleteTree(writer, run.root) })
	procs := []*proc{run.start(t, "r1"), run.start(t, "r2")}
	https := s.https()
	listed := func(key string) bool {
		for _, p := range procs {
			resp, err := https.Get("https://" + p.addr + "/v1/hotkeys")
			if err != nil {
				return false
			}
			var out struct {
				Apps []struct {
					HotKeys []struct {
						Key string `json:"key"`
					} `json:"hotkeys"`
				} `json:"apps"`
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			found := false
			for _, a := range out.Apps {
				for _, k := range a.HotKeys {
					found = found || k.Key == key
				}
			}
			if err != nil || resp.StatusCode != http.StatusOK || !found {
				return false
			}
		}
		return true
	}
	produce := func(rates map[string]float64) (stop func()) {
		prod := newProducer(t, s.kafka, run.topic, true)
		prod.w.Transport = s.kafkaSec.Transport()
		pctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { prod.run(pctx, t, rates, 500) })
		return func() { cancel(); wg.Wait() }
	}
	before := map[string]float64{"fixed:a": 1000, "fixed:b": 1000, "fixed:c": 1000} // 2x the threshold of 500
	stop := produce(before)
	waitFor(t, 60*time.Second, "the fixed keys listed by both", func() bool {
		return listed("fixed:a") && listed("fixed:b") && listed("fixed:c")
	})
	stop()

	stopSecureKafka(t)
	time.Sleep(5 * time.Second)
	up := exec.Command("../../deployments/local/stack.sh", "up", "--secure")
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("stack.sh up --secure: %v\n%s", err, out)
	}
	back := time.Now()
	before["after:2x"] = 1000
	defer produce(before)()
	waitFor(t, 20*time.Second, "after:2x listed by both", func() bool { return listed("after:2x") })
	d := time.Since(back)
	t.Logf("secured stack: after:2x listed by both %v after `stack.sh up --secure` returned", d.Round(time.Millisecond))
	if d > brokerRestartTarget {
		t.Errorf("after:2x listed %v after the broker was back, want within %v", d.Round(time.Millisecond), brokerRestartTarget)
	}
}

// stopSecureKafka stops the secured stack's broker with SIGTERM, as
// stack.sh does, and waits until it has exited.
func stopSecureKafka(t *testing.T) {
	t.Helper()
	dir := os.Getenv("HOTSPOT_STACK_DIR")
	if dir == "" {
		dir = "../../.stack"
	}
	b, err := os.ReadFile(filepath.Join(dir, "secure", "kafka.pid"))
	if err != nil {
		t.Fatalf("the secured broker's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to the secured broker (pid %d): %v", pid, err)
	}
	waitFor(t, 30*time.Second, "the secured broker to exit", func() bool {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err != nil || strings.Contains(string(st), ") Z ")
	})
}
