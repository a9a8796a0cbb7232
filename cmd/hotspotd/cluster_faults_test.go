package main

// Fault tests on the clustered stack (stack.sh up --cluster: three Kafka
// brokers, replication factor 3 and min.insync.replicas 2, a ZooKeeper
// ensemble of three): three hotspotd under 50,000 accesses/s, scored against
// the load generator's truth as the other fault tests are (faults_test.go).
// They run when HOTSPOT_CLUSTER=1 (`stack.sh env --cluster` sets it; `make
// test` runs them in a pass of their own), and leave the cluster whole.

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/hotcache"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// clusterDetectTarget: a key that turns hot when a broker dies is to be
// listed by every view within this long of the failure (issue 25). On the
// 2-core test machine, with three brokers, three ZooKeeper servers, three
// hotspotd and the load on it, runs took 1.2 to 3.2 s (docs/operations.md,
// "Clusters"): the test logs the target and fails past clusterDetectBound.
const (
	clusterDetectTarget = 2 * time.Second
	clusterDetectBound  = 4 * time.Second
)

// clusterZKTarget: publication resumes within this long of a new ZooKeeper
// leader's election.
const clusterZKTarget = 2 * time.Second

// onClusterStack is newCluster on the clustered stack.
func onClusterStack(t *testing.T, partitions int) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("fault test on the clustered stack; -short skips it")
	}
	if os.Getenv("HOTSPOT_CLUSTER") != "1" {
		t.Skip("needs the clustered stack: `deployments/local/stack.sh up --cluster` and `eval \"$(deployments/local/stack.sh env --cluster)\"`")
	}
	c := buildCluster(t, stacktest.Kafka(t), stacktest.ZK(t), stacktest.Name(t), partitions)
	if rf := replicas(t, c); rf != 3 {
		t.Fatalf("topic %s has %d replicas per partition, want the cluster's default of 3", c.topic, rf)
	}
	return c
}

// faultAt is when, after the load starts, a cluster test injects its fault.
const faultAt = 12 * time.Second

// clusterWorkload is faultWorkload at 50,000 accesses/s (the background
// spread over a million keys, Zipf 0.7, its busiest key at about 0.24x),
// plus after:2x, hot from hotAt on.
func clusterWorkload(c *cluster, d, coldAt, hotAt time.Duration) loadgen.Config {
	cfg := faultWorkload(c.brokers, c.topic, d, coldAt)
	cfg.Flashes = append(cfg.Flashes, loadgen.Flash{App: "shop", Key: "after:2x", Start: hotAt, Rate: 2 * faultThreshold})
	cfg.Rate, cfg.Keys, cfg.Skew = 50_000, 1_000_000, 0.7
	cfg.MaxInflight = 256 << 20
	return cfg
}

// member runs `stack.sh verb name --cluster`.
func member(t *testing.T, verb, name string) {
	t.Helper()
	out, err := exec.Command("../../deployments/local/stack.sh", verb, name, "--cluster").CombinedOutput()
	if err != nil {
		t.Fatalf("stack.sh %s %s --cluster: %v\n%s", verb, name, err, out)
	}
}

// leaders returns, per broker id, how many partitions of c's topic it leads.
func leaders(t *testing.T, c *cluster) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, p := range partitionsOf(t, c) {
		out[p.Leader.ID]++
	}
	return out
}

// replicas returns how many replicas the partitions of c's topic have (the
// least of them).
func replicas(t *testing.T, c *cluster) int {
	t.Helper()
	n := -1
	for _, p := range partitionsOf(t, c) {
		if n < 0 || len(p.Replicas) < n {
			n = len(p.Replicas)
		}
	}
	return n
}

// insync reports whether every partition of c's topic has all its replicas
// in sync.
func insync(t *testing.T, c *cluster) bool {
	for _, p := range partitionsOf(t, c) {
		if len(p.Isr) < len(p.Replicas) {
			return false
		}
	}
	return true
}

func partitionsOf(t *testing.T, c *cluster) []kafka.Partition {
	t.Helper()
	var last error
	for _, addr := range strings.Split(c.brokers, ",") {
		conn, err := kafka.DialContext(context.Background(), "tcp", addr)
		if err != nil {
			last = err
			continue
		}
		ps, err := conn.ReadPartitions(c.topic)
		conn.Close()
		if err == nil {
			return ps
		}
		last = err
	}
	t.Fatalf("metadata of %s: %v", c.topic, last)
	return nil
}

// groupCoordinator returns the broker that coordinates c's consumer group,
// or -1: when it dies, the group rebalances.
func groupCoordinator(t *testing.T, c *cluster) int {
	cl := &kafka.Client{Addr: kafka.TCP(strings.Split(c.brokers, ",")...), Timeout: 5 * time.Second}
	r, err := cl.FindCoordinator(t.Context(), &kafka.FindCoordinatorRequest{Key: c.group, KeyType: kafka.CoordinatorKeyTypeConsumer})
	if err != nil || r.Error != nil {
		t.Logf("the group's coordinator: %v, %v", err, r)
		return -1
	}
	return int(r.Coordinator.NodeID)
}

// zkMode returns a ZooKeeper server's mode (leader, follower) from its srvr
// command, or "" when it does not answer.
func zkMode(addr string) string {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return ""
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return m
		}
	}
	return ""
}

// zkLeader returns the number (1 to 3) of the ensemble's leader, or 0.
func zkLeader(c *cluster) int {
	for i, addr := range strings.Split(c.zk, ",") {
		if zkMode(addr) == "leader" {
			return i + 1
		}
	}
	return 0
}

// listedBy returns, per view, how long after from a sample of it first
// listed key.
func (r *faultRun) listedBy(key string, from time.Time) map[string]time.Duration {
	r.views.mu.Lock()
	defer r.views.mu.Unlock()
	seen := map[string]time.Duration{}
	for _, sm := range r.views.samples {
		if _, ok := seen[sm.view]; !ok && sm.at.After(from) && slices.Contains(sm.keys, key) {
			seen[sm.view] = sm.at.Sub(from)
		}
	}
	return seen
}

// keptDuring reports the views that did not list key in a sample between
// from and to.
func (r *faultRun) keptDuring(key string, from, to time.Time) []string {
	r.views.mu.Lock()
	defer r.views.mu.Unlock()
	var lost []string
	for _, sm := range r.views.samples {
		if sm.at.After(from) && sm.at.Before(to) && !slices.Contains(sm.keys, key) && !slices.Contains(lost, sm.view) {
			lost = append(lost, fmt.Sprintf("%s at +%v", sm.view, sm.at.Sub(r.start).Round(time.Millisecond)))
		}
	}
	return lost
}

// TestClusterBrokerKill: the broker that leads the most partitions of the
// access topic is killed (SIGKILL) under load. A key that turns hot at 2x at
// that moment is listed by every view within clusterDetectBound, the
// load generator (acks=all, retrying) loses no record, and the views agree
// with the truth throughout. The broker is started again at the end.
func TestClusterBrokerKill(t *testing.T) {
	clusterBrokerKill(t, func(c *cluster, led map[int]int) int {
		victim := 0
		for id, n := range led {
			if victim == 0 || n > led[victim] {
				victim = id
			}
		}
		return victim
	})
}

// TestClusterCoordinatorKill is TestClusterBrokerKill with the detectors'
// group coordinator as the victim, the slowest case: the group must find a
// new coordinator, which loads the group, and rebalance before any
// partition is read again (docs/operations.md, "Why a broker's death can take
// 2 s to detect").
func TestClusterCoordinatorKill(t *testing.T) {
	clusterBrokerKill(t, func(c *cluster, _ map[int]int) int {
		victim := groupCoordinator(t, c)
		if victim <= 0 {
			t.Fatal("the group's coordinator is not known")
		}
		return victim
	})
}

// clusterBrokerKill kills the broker pick names, given how many access
// partitions each broker leads, and checks what TestClusterBrokerKill says.
func clusterBrokerKill(t *testing.T, pick func(c *cluster, led map[int]int) int) {
	c := onClusterStack(t, 8)
	r := newFaultRun(t, c)
	r.runLoad(clusterWorkload(c, 40*time.Second, 14*time.Second, faultAt))
	time.Sleep(faultAt)
	by := leaders(t, c)
	victim := pick(c, by)
	t.Cleanup(func() {
		member(t, "start", "kafka"+strconv.Itoa(victim))
		waitFor(t, 120*time.Second, "every replica back in sync", func() bool { return insync(t, c) })
	})
	coordinator := groupCoordinator(t, c)
	killed := time.Now()
	member(t, "kill", "kafka"+strconv.Itoa(victim))
	t.Logf("killed broker %d (leader of %d of 8 partitions; the group's coordinator is broker %d) at +%v",
		victim, by[victim], coordinator, killed.Sub(r.start).Round(time.Millisecond))
	waitFor(t, recoveryBound, "after:2x in every view", func() bool { return len(r.listedBy("after:2x", killed)) == 3 })
	seen := r.listedBy("after:2x", killed)
	t.Logf("after:2x, hot from the kill, listed by the views after %v; partitions now led by %v; detectors assigned partitions again after %v",
		seen, leaders(t, c), assignedAfter(t, c, killed))
	for view, d := range seen {
		switch {
		case d > clusterDetectBound:
			t.Errorf("view %s listed after:2x %v after the broker died, want within %v", view, d.Round(time.Millisecond), clusterDetectBound)
		case d > clusterDetectTarget:
			t.Logf("view %s listed after:2x %v after the broker died: past the %v target", view, d.Round(time.Millisecond), clusterDetectTarget)
		}
	}
	if lost := r.keptDuring("fixed:3x", killed, killed.Add(recoveryBound)); len(lost) > 0 {
		t.Errorf("fixed:3x missing from %v after the broker died", lost)
	}
	r.faults = append(r.faults, [2]time.Time{killed, killed.Add(clusterDetectTarget)})
	res := r.finish()
	if res.stats.FailedRecords > 0 {
		t.Errorf("the load generator lost %d records (%d events) to the broker's death, want none with acks=all", res.stats.FailedRecords, res.stats.FailedEvents)
	}
}

// TestClusterZooKeeperLeaderKill: the ensemble's leader is killed (SIGKILL)
// under load. Every view keeps the hot set while the others elect a new
// leader, and a key that turned hot meanwhile is listed within
// clusterZKTarget of the election. The server is started again at the end.
func TestClusterZooKeeperLeaderKill(t *testing.T) {
	c := onClusterStack(t, 8)
	r := newFaultRun(t, c)
	r.runLoad(clusterWorkload(c, 35*time.Second, 30*time.Second, faultAt))
	time.Sleep(faultAt)
	victim := zkLeader(c)
	if victim == 0 {
		t.Fatal("no ZooKeeper server says it leads")
	}
	addrs := strings.Split(c.zk, ",")
	t.Cleanup(func() {
		member(t, "start", "zookeeper"+strconv.Itoa(victim))
		waitFor(t, 60*time.Second, "the server back in the ensemble", func() bool { return zkMode(addrs[victim-1]) != "" })
	})
	killed := time.Now()
	member(t, "kill", "zookeeper"+strconv.Itoa(victim))
	var elected time.Time
	waitFor(t, 30*time.Second, "a new ZooKeeper leader", func() bool {
		if l := zkLeader(c); l != 0 && l != victim {
			elected = time.Now()
			return true
		}
		return false
	})
	t.Logf("killed ZooKeeper %d at +%v; a new leader at +%v", victim, killed.Sub(r.start).Round(time.Millisecond), elected.Sub(r.start).Round(time.Millisecond))
	waitFor(t, recoveryBound, "after:2x in every view", func() bool { return len(r.listedBy("after:2x", killed)) == 3 })
	seen := r.listedBy("after:2x", killed)
	t.Logf("after:2x, hot from the kill, listed by the views after %v (from the kill)", seen)
	for view, d := range seen {
		if after := killed.Add(d).Sub(elected); after > clusterZKTarget {
			t.Errorf("view %s listed after:2x %v after the election, want within %v", view, after.Round(time.Millisecond), clusterZKTarget)
		}
	}
	if lost := r.keptDuring("fixed:3x", killed, elected.Add(clusterZKTarget)); len(lost) > 0 {
		t.Errorf("fixed:3x missing from %v during the election", lost)
	}
	r.faults = append(r.faults, [2]time.Time{killed, elected.Add(clusterZKTarget)})
	r.finish()
}

// rollingLoad is how long TestClusterRollingRestart's load lasts, its keys
// hot until 5 s before its end; the restarts must be over 10 s before it. On
// the shared 2-core machine a broker took 20 to 45 s from SIGTERM to every
// replica in sync (issue 41 saw 33 s), so three take up to two minutes.
const rollingLoad = 150 * time.Second

// TestClusterSteadyRates: no fault on the clustered stack (three brokers,
// replication 3, acks=all) under the cluster tests' load: the steady keys'
// published rates, from 1 s after a view listed them, have a bias within
// ±2 % of the true trailing-window rate (issue 41's held-out rate check),
// every one of them within a bucket (10 %) of it, and no view lists a
// false, stale or vanished key. The log gives the largest error against
// the 5 %, and every stretch beyond it: 0.0 % in 7 runs of 8 on a
// quiet machine since each access goes out with its step of event time,
// and one bucket late (10 %) for 0.4 s in the eighth (BENCHMARKS.md, R2b),
// so 5 % would fail about one run in eight. HOTSPOT_CLUSTER_RATE sets the
// background's accesses/s (default 50,000), to measure the check on a
// machine loaded further.
func TestClusterSteadyRates(t *testing.T) {
	c := onClusterStack(t, 8)
	r := newFaultRun(t, c)
	r.rates = rateBounds{tolerance: 0.10, bias: 0.02, strict: true}
	cfg := clusterWorkload(c, 40*time.Second, 30*time.Second, faultAt)
	if v := os.Getenv("HOTSPOT_CLUSTER_RATE"); v != "" {
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil || rate <= 0 {
			t.Fatalf("HOTSPOT_CLUSTER_RATE=%q: want accesses per second", v)
		}
		cfg.Rate = rate
	}
	r.runLoad(cfg)
	r.finish()
	// A round whose partitions read disjoint stretches of event time goes
	// out as several flushes (docs/detector.md): say how often.
	for _, id := range slices.Sorted(maps.Keys(r.procs)) {
		m := scrapeMetrics(t, r.procs[id].addr)
		t.Logf("%s: %.0f rounds split of %.0f", id, m["hotspot_detector_split_rounds_total"], m["hotspot_detector_flush_seconds_count"])
	}
	t.Logf("load average %s", loadAverage())
}

// TestClusterRollingRestart: the three brokers restart one at a time
// (SIGTERM, start, every replica back in sync before the next) under load.
// The load generator gives up on no record (its writer hands a batch its
// attempts gave up on over again for 60 s, kafkaio.Resender), nor does an
// app's SDK reporting beside it (500 Gets/s over 1,000 keys, a batch every
// 100 ms, to a topic of its own: none of its batches failed or dropped); no hot key leaves any view
// at any moment (no gap), and the views agree with the truth throughout,
// their rates during the restarts at most rollingOverRead above it. It logs
// both figures issue 41 asks for: the records not delivered and the longest
// time a hot key was missing from a view, each with its target of 0.
func TestClusterRollingRestart(t *testing.T) {
	c := onClusterStack(t, 8)
	r := newFaultRun(t, c)
	r.rates.overRead = rollingOverRead
	r.lossy = true // undelivered records are counted and failed below, not at once
	sdk := startReporter(t, c)
	r.runLoad(clusterWorkload(c, rollingLoad, rollingLoad-5*time.Second, faultAt))
	time.Sleep(faultAt)
	began := time.Now()
	for i := 1; i <= 3; i++ {
		name := "kafka" + strconv.Itoa(i)
		stopped := time.Now()
		member(t, "stop", name)
		down := time.Since(stopped)
		member(t, "start", name)
		waitFor(t, 60*time.Second, name+"'s replicas back in sync", func() bool { return insync(t, c) })
		t.Logf("%s stopped in %v, restarted and in sync at +%v", name, down.Round(time.Millisecond), time.Since(r.start).Round(time.Millisecond))
	}
	ended := time.Now()
	if ended.Sub(r.start) > rollingLoad-10*time.Second {
		t.Fatalf("the restarts took until +%v, past the load's hot keys", ended.Sub(r.start).Round(time.Second))
	}
	r.views.mu.Lock()
	samples := slices.Clone(r.views.samples)
	r.views.mu.Unlock()
	var longest time.Duration
	for _, key := range []string{"fixed:2x", "fixed:3x"} {
		gaps := missingSpans(samples, key, began, ended)
		for view, d := range gaps {
			longest = max(longest, d)
			t.Errorf("%s missing from view %s for up to %v during the rolling restart", key, view, d.Round(time.Millisecond))
		}
	}
	r.faults = append(r.faults, [2]time.Time{began, ended})
	rep := sdk.stop()
	res := r.finish()
	t.Logf("rolling restart: %d records (%d events) not delivered (target 0); the longest a hot key was missing from a view: %v (target 0); load average %s",
		res.stats.FailedRecords, res.stats.FailedEvents, longest.Round(time.Millisecond), loadAverage())
	t.Logf("the SDK beside it: %.0f batches handed to Kafka, %.0f handed over again, %.0f failed, %.0f accesses dropped for a full report buffer",
		rep["reporter_batches_total"], rep["reporter_resent_records_total"], rep["reporter_failed_records_total"], rep["reporter_dropped_accesses_total"])
	if res.stats.FailedRecords > 0 {
		t.Errorf("the load generator gave up on %d records (%d events) during the rolling restart, want none", res.stats.FailedRecords, res.stats.FailedEvents)
	}
	if rep["reporter_failed_records_total"] > 0 || rep["reporter_dropped_accesses_total"] > 0 {
		t.Errorf("the SDK gave up on %.0f report batches and dropped %.0f accesses during the rolling restart, want none",
			rep["reporter_failed_records_total"], rep["reporter_dropped_accesses_total"])
	}
}

// sdkReporter is an app's hotcache Client reporting to a cluster's topic.
type sdkReporter struct {
	t      *testing.T
	app    *hotcache.Client
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}
}

// startReporter starts an app "sdk" reading 1,000 keys round-robin, 500
// Gets/s (few: the test process also runs the load generator), from a
// Loader, reporting to a topic of its own on c's brokers
// (replicated as the access topic is), so that the access topic holds the
// load generator's records alone (faultRun.duplicates counts them).
func startReporter(t *testing.T, c *cluster) *sdkReporter {
	t.Helper()
	topic := c.topic + "-sdk"
	if _, err := kafkaio.EnsureTopic(t.Context(), strings.Split(c.brokers, ","), topic, 8); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	loader := hotcache.LoaderFunc(func(_ context.Context, key string) ([]byte, error) { return []byte(key), nil })
	app, err := hotcache.New(t.Context(), hotcache.WithApp("sdk"), hotcache.WithInstanceID("rolling-restart"),
		hotcache.WithKafka(strings.Split(c.brokers, ","), topic), hotcache.WithLoader(loader),
		hotcache.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &sdkReporter{t: t, app: app, reg: reg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for i := 0; ctx.Err() == nil; {
			select {
			case <-ctx.Done():
			case <-tk.C:
				for range 10 {
					app.Get(ctx, "k:"+strconv.Itoa(i%1000))
					i++
				}
			}
		}
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

// stop ends the Gets, closes the Client (which waits for its reports in
// flight) and returns its reporter counters, summed over labels, by name
// without the hotspot_hotcache_ prefix.
func (s *sdkReporter) stop() map[string]float64 {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	s.cancel = nil
	<-s.done
	if err := s.app.Close(); err != nil {
		s.t.Errorf("closing the SDK: %v", err)
	}
	mfs, err := s.reg.Gather()
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		name, ok := strings.CutPrefix(mf.GetName(), "hotspot_hotcache_")
		if !ok || !strings.HasPrefix(name, "reporter_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			if name == "reporter_dropped_accesses_total" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == "reason" && l.GetValue() == "kafka"
			}) {
				continue
			}
			out[name] += m.GetCounter().GetValue()
		}
	}
	return out
}

// missingSpans returns, per view that lacked key in a sample taken between
// from and to, the longest stretch it lacked it: from the first sample
// without it to the next sample with it (or to the view's last sample
// before to).
func missingSpans(samples []sample, key string, from, to time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	since := map[string]time.Time{} // view -> its first sample without key, in the current stretch
	last := map[string]time.Time{}
	for _, sm := range samples {
		if sm.at.Before(from) || sm.at.After(to) {
			continue
		}
		last[sm.view] = sm.at
		s, open := since[sm.view]
		switch has := slices.Contains(sm.keys, key); {
		case !has && !open:
			since[sm.view] = sm.at
		case has && open:
			out[sm.view] = max(out[sm.view], sm.at.Sub(s))
			delete(since, sm.view)
		}
	}
	for view, s := range since {
		out[view] = max(out[view], last[view].Sub(s))
	}
	return out
}

// loadAverage returns the machine's load averages (/proc/loadavg), or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// TestClusterZooKeeperFollowerDown: a follower of the ensemble is away for
// 30 s under load while keys turn hot (after:2x) and cold (cools:*). The
// sessions on it move to the others: every view and an app's watcher follow
// each change, and the watcher ends with the views' hot set.
func TestClusterZooKeeperFollowerDown(t *testing.T) {
	c := onClusterStack(t, 8)
	r := newFaultRun(t, c)
	w := c.watch(t)
	r.runLoad(clusterWorkload(c, 50*time.Second, faultAt+15*time.Second, faultAt+10*time.Second))
	time.Sleep(faultAt)
	victim := 0
	for i, addr := range strings.Split(c.zk, ",") {
		if zkMode(addr) == "follower" {
			victim = i + 1
			break
		}
	}
	if victim == 0 {
		t.Fatal("no ZooKeeper server says it follows")
	}
	name := "zookeeper" + strconv.Itoa(victim)
	member(t, "stop", name)
	down := time.Now()
	t.Cleanup(func() { member(t, "start", name) })
	time.Sleep(30 * time.Second)
	member(t, "start", name)
	t.Logf("%s down from +%v for 30 s", name, down.Sub(r.start).Round(time.Millisecond))
	r.faults = append(r.faults, [2]time.Time{down, down.Add(2 * time.Second)})
	r.finish()
	// The watcher saw what the views see: after:2x hot, the cools:* keys
	// cold again.
	waitFor(t, recoveryBound, "the watcher to agree with the views", func() bool {
		snap := w.Snapshot()
		_, after := snap.Key("shop", "after:2x")
		_, cools := snap.Key("shop", "cools:0")
		return after && !cools
	})
}

// zkProxy forwards loopback connections to one ZooKeeper server until cut.
// Cut, it forwards nothing in either direction and holds every connection,
// old and new, open: a partition drops packets, it does not refuse them, so
// the client learns of it only from its own timeouts.
type zkProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newZKProxy(t *testing.T, target string) *zkProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &zkProxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close(); p.drop() })
	return p
}

func (p *zkProxy) serve(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	cut := p.cut
	p.mu.Unlock()
	if cut {
		p.pipe(nil, c)
		return
	}
	up, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	go p.pipe(up, c)
	p.pipe(c, up)
}

// pipe copies src to dst (nil: nowhere) until either closes, dropping what
// it reads while the proxy is cut.
func (p *zkProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			src.Close()
			if dst != nil {
				dst.Close()
			}
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if !cut && dst != nil {
			if _, err := dst.Write(buf[:n]); err != nil {
				src.Close()
				return
			}
		}
	}
}

// set cuts (true) or heals the link; healing closes every connection, which
// the partition broke mid-stream, so that the client opens new ones.
func (p *zkProxy) set(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
	if !cut {
		p.drop()
	}
}

func (p *zkProxy) drop() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// TestClusterZooKeeperPartition: one hotspotd (n3) loses ZooKeeper, and only
// ZooKeeper, for 25 s under load (its links to the ensemble go through
// proxies that then drop every packet). Its session expires; its published
// decisions go with it; the other two take over its shard: their views and
// an app's watcher keep every hot key and drop the keys that turn cold
// meanwhile, within the recovery bound. n3's detector, which still reads its
// partitions, routes its own shard's keys as the others do once their
// answers leave that shard out (shardclient.Client.Send): from 3 s after n3's
// membership is gone until the heal, the others publish the steady keys at
// their whole rate, not at the share of the partitions they read. Healed,
// it joins again and its view agrees with the others.
func TestClusterZooKeeperPartition(t *testing.T) {
	c := onClusterStack(t, 8)
	var proxies []*zkProxy
	var addrs []string
	for _, a := range strings.Split(c.zk, ",") {
		p := newZKProxy(t, a)
		proxies = append(proxies, p)
		addrs = append(addrs, p.ln.Addr().String())
	}
	c.zkOf = map[string]string{"n3": strings.Join(addrs, ",")}
	r := newFaultRun(t, c)
	w := c.watch(t)
	r.runLoad(clusterWorkload(c, 60*time.Second, faultAt+8*time.Second, faultAt+4*time.Second))
	time.Sleep(faultAt)
	cut := time.Now()
	for _, p := range proxies {
		p.set(true)
	}
	r.views.mu.Lock()
	delete(r.views.procs, "n3") // its own view is what it last saw: not scored while cut off
	r.views.mu.Unlock()
	zc := stacktest.ZKConn(t)
	waitFor(t, 20*time.Second, "n3's members to leave ZooKeeper", func() bool {
		ok, _, err := zc.Exists(c.root + "/members/aggregators/n3")
		return err == nil && !ok
	})
	gone := time.Now()
	t.Logf("n3 cut off at +%v; its membership gone after %v", cut.Sub(r.start).Round(time.Millisecond), gone.Sub(cut).Round(time.Millisecond))
	time.Sleep(time.Until(cut.Add(25 * time.Second)))
	healed := time.Now()
	for _, p := range proxies {
		p.set(false)
	}
	after := watchAfterHeal(w)
	waitFor(t, 30*time.Second, "n3 to join again", func() bool {
		ok, _, err := zc.Exists(c.root + "/members/aggregators/n3")
		return err == nil && ok
	})
	r.views.set("n3", r.procs["n3"].addr)
	t.Logf("healed at +%v; n3 a member again after %v", healed.Sub(r.start).Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
	// n3's view is not scored between the cut and the recovery bound after
	// its return: it kept its last hot set, as every reader does.
	r.views.mu.Lock()
	r.views.samples = slices.DeleteFunc(r.views.samples, func(sm sample) bool {
		return sm.view == "n3" && sm.at.After(cut) && sm.at.Before(time.Now().Add(recoveryBound))
	})
	r.views.mu.Unlock()
	r.faults = append(r.faults, [2]time.Time{cut, healed.Add(recoveryBound)})
	res := r.finish()
	after.check(t)
	r.views.mu.Lock()
	samples := slices.Clone(r.views.samples)
	r.views.mu.Unlock()
	for _, key := range []string{"fixed:2x", "fixed:3x"} {
		lo, hi, mean, n := ratesBetween(res.stats.Truth, samples, key, gone.Add(3*time.Second), healed)
		t.Logf("%s while n3 was cut off, in the others' views: published %.2f to %.2f times the true rate, bias %+.1f%% (%d samples)", key, lo, hi, 100*(mean-1), n)
		switch {
		case n == 0:
			t.Errorf("%s: no sample of the others' views while n3 was cut off", key)
		case lo < partitionUnderRead:
			t.Errorf("%s read %.2f times its true rate while n3 was cut off: counts of n3's partitions did not reach the shards that took its keys over", key, lo)
		}
	}
	snap := w.Snapshot()
	for _, key := range []string{"fixed:2x", "fixed:3x", "after:2x"} {
		if _, ok := snap.Key("shop", key); !ok {
			t.Errorf("the app's watcher lost %s", key)
		}
	}
	if _, ok := snap.Key("shop", "cools:0"); ok {
		t.Error("the app's watcher still has cools:0, cold since the partition")
	}
}

// healWatch samples an app's hot set (its watcher's snapshot) every 50 ms
// from the moment a cut-off process is healed, while it takes its shard
// back, to the end of the load.
type healWatch struct {
	stop    chan struct{}
	done    chan struct{}
	samples int
	stale   []time.Time            // samples that held a cools:* key, cold since before the heal
	missing map[string][]time.Time // samples that lacked a key hot throughout
}

func watchAfterHeal(w *hotwatch.Watcher) *healWatch {
	h := &healWatch{stop: make(chan struct{}), done: make(chan struct{}), missing: map[string][]time.Time{}}
	go func() {
		defer close(h.done)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-h.stop:
				return
			case now := <-tk.C:
				snap := w.Snapshot()
				h.samples++
				for _, k := range snap.App("shop") {
					if strings.HasPrefix(k.Key, "cools:") {
						h.stale = append(h.stale, now)
						break
					}
				}
				for _, key := range []string{"fixed:2x", "fixed:3x", "after:2x"} {
					if _, ok := snap.Key("shop", key); !ok {
						h.missing[key] = append(h.missing[key], now)
					}
				}
			}
		}
	}()
	return h
}

// check stops the sampling and fails the test when a key cold since before
// the heal came back, or a key hot throughout went missing, in any sample:
// the healed process takes its shard back without publishing what it held
// when it was cut off, and without a gap.
func (h *healWatch) check(t *testing.T) {
	t.Helper()
	close(h.stop)
	<-h.done
	t.Logf("the app's hot set after the heal: %d samples, %d with a cools:* key, missing %v", h.samples, len(h.stale), h.missing)
	if len(h.stale) > 0 {
		t.Errorf("a key cold since before the heal was in the app's hot set again, in %d samples of %d from %v on",
			len(h.stale), h.samples, h.stale[0].Format(time.StampMilli))
	}
	for key, at := range h.missing {
		t.Errorf("%s, hot throughout, was missing from the app's hot set after the heal in %d samples of %d, from %v on",
			key, len(at), h.samples, at[0].Format(time.StampMilli))
	}
}

// partitionUnderRead is the least a steady key's published rate may read,
// relative to the truth, in the others' views while one process is cut off
// from ZooKeeper. Its detector still counts a third of the partitions: had
// it kept routing its former shard's keys to itself, the shards that took
// them over would read about two thirds of their rate (down to half was
// seen). The margin allows the bucket or two short that a loaded machine
// shows at any time (docs/aggregator.md, "Rate").
const partitionUnderRead = 0.8

// ratesBetween returns the lowest, the highest and the mean published rate
// of key, relative to its true trailing-window rate, in the samples taken in
// [from, to), and how many there were.
func ratesBetween(truth *loadgen.Truth, samples []sample, key string, from, to time.Time) (lo, hi, mean float64, n int) {
	var counts []uint64
	for _, k := range truth.Keys {
		if k.App == "shop" && k.Key == key {
			counts = k.Counts
		}
	}
	tr := trailing(counts, truth.SlotMs)
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range samples {
		i := slices.Index(s.keys, key)
		slot := int((s.at.UnixMilli() - truth.StartMs) / truth.SlotMs)
		if s.at.Before(from) || !s.at.Before(to) || i < 0 || slot < 0 || slot >= len(tr) || tr[slot] == 0 {
			continue
		}
		q := s.rates[i] / tr[slot]
		lo, hi, mean, n = min(lo, q), max(hi, q), mean+q, n+1
	}
	if n > 0 {
		mean /= float64(n)
	}
	return lo, hi, mean, n
}

// TestClusterWriterFollowsLeader: two Writers (acks=all, retrying as the
// SDK's reporter does) write to a one-partition topic, one over
// kafkaio.WriterTransport and one over a plain kafka.Transport with the same
// 2 s metadata TTL, when the partition's leader is killed. The first learns
// the new leader at its next attempt once the broker is fenced (1 s on the
// cluster stack): its writes are acknowledged again within 2 s of the kill,
// the detection target. The plain one sends to the dead broker until its
// next timed refresh (logged, not held).
func TestClusterWriterFollowsLeader(t *testing.T) {
	if os.Getenv("HOTSPOT_CLUSTER") != "1" {
		t.Skip("needs the clustered stack: `deployments/local/stack.sh up --cluster` and `eval \"$(deployments/local/stack.sh env --cluster)\"`")
	}
	c := &cluster{t: t, brokers: stacktest.Kafka(t), topic: stacktest.Name(t)}
	brokers := strings.Split(c.brokers, ",")
	if _, err := kafkaio.EnsureTopic(t.Context(), brokers, c.topic, 1); err != nil {
		t.Fatal(err)
	}
	transports := map[string]kafka.RoundTripper{
		"kafkaio.WriterTransport": (*kafkaio.Security)(nil).WriterTransport(c.topic),
		"kafka.Transport":         &kafka.Transport{MetadataTTL: kafkaio.WriterMetadataTTL, MetadataTopics: []string{c.topic}},
	}
	type acked struct {
		name          string
		started, done time.Time
	}
	var (
		mu   sync.Mutex
		acks []acked
		wg   sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(t.Context())
	var writers []*kafka.Writer
	defer func() {
		cancel()
		wg.Wait()
		for _, w := range writers {
			w.Close()
		}
	}()
	for name, tr := range transports {
		w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: c.topic, RequiredAcks: kafka.RequireAll,
			BatchTimeout: time.Millisecond, MaxAttempts: 40, WriteBackoffMin: 50 * time.Millisecond,
			WriteBackoffMax: 250 * time.Millisecond, WriteTimeout: 2 * time.Second, Transport: tr}
		writers = append(writers, w)
		wg.Go(func() {
			for ctx.Err() == nil {
				started := time.Now()
				if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(name)}); err == nil {
					mu.Lock()
					acks = append(acks, acked{name, started, time.Now()})
					mu.Unlock()
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	time.Sleep(2 * time.Second)
	victim := partitionsOf(t, c)[0].Leader.ID
	t.Cleanup(func() {
		member(t, "start", "kafka"+strconv.Itoa(victim))
		waitFor(t, 120*time.Second, "every replica back in sync", func() bool { return insync(t, c) })
	})
	member(t, "kill", "kafka"+strconv.Itoa(victim))
	killed := time.Now() // after SIGKILL: a write sent before it may be acknowledged by the victim
	firstAfter := func() map[string]time.Duration {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]time.Duration{}
		for _, a := range acks {
			if _, ok := out[a.name]; !ok && a.started.After(killed) {
				out[a.name] = a.done.Sub(killed)
			}
		}
		return out
	}
	var elected time.Duration
	waitFor(t, 15*time.Second, "a new leader", func() bool {
		for _, p := range partitionsOf(t, c) {
			if p.Leader.ID != victim && p.Leader.ID >= 0 {
				elected = time.Since(killed)
				return true
			}
		}
		return false
	})
	waitFor(t, 15*time.Second, "both writers acknowledged after the kill", func() bool { return len(firstAfter()) == 2 })
	got := firstAfter()
	t.Logf("broker %d, the leader, killed; a new leader listed after %v; the first write sent after the kill acknowledged after %v",
		victim, elected.Round(time.Millisecond), got)
	if d := got["kafkaio.WriterTransport"]; d > 2*time.Second {
		t.Errorf("a Writer over kafkaio.WriterTransport wrote again %v after the leader's death, want within 2 s", d.Round(time.Millisecond))
	}
}

// TestMissingSpans: the longest stretch each view lacked a key, from its
// first sample without it to its next sample with it, or to its last sample.
func TestMissingSpans(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	samples := []sample{
		{at: at(0), view: "a", keys: []string{"k"}},
		{at: at(0), view: "b", keys: []string{"k"}},
		{at: at(200), view: "a", keys: nil},
		{at: at(200), view: "b", keys: []string{"k"}},
		{at: at(400), view: "a", keys: nil},
		{at: at(400), view: "b", keys: nil},
		{at: at(600), view: "a", keys: []string{"k"}},
		{at: at(600), view: "b", keys: nil},
		{at: at(800), view: "a", keys: nil},
		{at: at(800), view: "c", keys: []string{"k"}},
		{at: at(1000), view: "a", keys: []string{"k"}},
		{at: at(1000), view: "b", keys: nil},
		{at: at(5000), view: "a", keys: nil}, // after to
	}
	got := missingSpans(samples, "k", at(0), at(1000))
	want := map[string]time.Duration{"a": 400 * time.Millisecond, "b": 600 * time.Millisecond}
	if !maps.Equal(got, want) {
		t.Errorf("missingSpans = %v, want %v", got, want)
	}
}
