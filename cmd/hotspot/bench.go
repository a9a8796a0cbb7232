package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/rulestore"
	"github.com/hotspot-dev/hotspot/internal/score"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/rules"
)

const benchHelp = `
Runs a workload against a running cluster and reports what it achieved:
throughput (wall, per CPU-second of the hotspotd processes, and per
CPU-second of the whole pipeline: hotspotd, the Kafka broker and ZooKeeper),
the Kafka requests and bytes it took, detection
delay from each key's true threshold crossing (the generator's send log) to
its publication in ZooKeeper and to its value in the L1 of an app (a hotcache
client embedded in this command), precision and recall against the ground truth,
and the hotspotd processes' resident memory.

The broker's and ZooKeeper's CPU time is read from /proc/<pid>/stat, for
the pids given by --broker-pid and --zk-pid or else the pid files of the
local stack in --stack-dir (HOTSPOT_STACK_DIR, as deployments/local/stack.sh;
default .stack, the stack of make up run from the repository's top). A
process without a pid is left out of the pipeline's figure, and the report
says so. Produce requests and bytes come from the generator's kafka-go
Writer, fetch and offset-commit requests from hotspotd's /metrics
(hotspot_kafka_*).

It takes the workload flags of hotspot load (see hotspot load --help for the
flash syntax); the run uses an app of its own (default bench-<time>) so keys
hot before the run do not count. By default it plants keys at 0.5, 0.8, 1.2,
2 and 10 times the threshold, starting 3 s into the run.

It exits non-zero when the run measured nothing (no hotspotd consumes the
workload's topic, or the detectors counted no record of it), when the
generator could not keep its schedule, and when a key at 1.2 times the
threshold or more was never reported (unless --allow-missed).

--form combined and --form mapped-json send access logs that hotspotd reads
only through an input file (see hotspot load --help): write it with
--input-out FILE (with the same --form and --topic; nothing runs), start
hotspotd with --input FILE, then run the bench; recall, precision and delay
are then measured as for the other forms. The file does not depend on the
run's app, so one hotspotd serves every run on that topic.

With --rules FILE it installs a rule list for the run's app first (and with
--rules-apps N for N-1 more apps without traffic), so that the throughput
with rules can be compared with the same run without them. Leave the list's
threshold and window at the defaults for the keys the run grades, or the
grading (against hotspotd's threshold) does not apply.

Examples:
  hotspot bench --rate 200000 --duration 30s
  hotspot bench --form json --rate 100000 --skew 0.8 --duration 20s --json bench.json
  hotspot bench --form combined --topic bench.nginx --input-out nginx.yaml
  hotspotd --input nginx.yaml ... &
  hotspot bench --form combined --topic bench.nginx --rate 50000 --duration 15s`

func runBench(ctx context.Context, args []string) error {
	return bench(ctx, args, os.Getenv, os.Stdout)
}

// benchResult is what hotspot bench reports (and writes with --json).
type benchResult struct {
	Workload    loadgen.Workload `json:"workload"`
	Form        string           `json:"form"`
	Seconds     float64          `json:"seconds"`
	Events      int64            `json:"events"`
	Records     int64            `json:"records"`
	Entries     int64            `json:"entries"`
	FailedEvent int64            `json:"failed_events"`
	MaxLagMs    int64            `json:"generator_max_lag_ms"`

	// From the hotspotd processes' own metrics, over the run.
	DetRecords       float64 `json:"detector_records"`
	DetEntries       float64 `json:"detector_entries"`
	HotspotdCPU      float64 `json:"hotspotd_cpu_seconds"`
	EntriesPerCPU    float64 `json:"entries_per_hotspotd_cpu_second"`
	RecordsPerCPU    float64 `json:"records_per_hotspotd_cpu_second"`
	EntriesPerSecond float64 `json:"detector_entries_per_wall_second"`
	MaxRSSBytes      float64 `json:"max_rss_bytes"`
	// Consumer lag (hotspot_detector_lag_records, all hotspotd), sampled
	// every second from the start of the workload to the end of the settle
	// time: the largest, and the mean over the first and the second half of
	// the samples (a lag that grows means the detectors fall behind).
	LagMax        float64 `json:"lag_max_records"`
	LagFirstHalf  float64 `json:"lag_mean_first_half_records"`
	LagSecondHalf float64 `json:"lag_mean_second_half_records"`
	Invalid       float64 `json:"invalid_records"`
	// Lines of an --input topic that yielded no access
	// (hotspot_input_dropped_total, every topic of the hotspotds): with a
	// form read through an input file, lines the file did not map.
	Dropped float64 `json:"input_dropped_lines"`

	// The whole pipeline over the same interval (workload plus settle):
	// hotspotd as above, the broker and ZooKeeper from /proc; a process
	// not measured is -1 and left out of PipelineCPU.
	IntervalSeconds        float64 `json:"interval_seconds"`
	BrokerPID              int     `json:"broker_pid,omitempty"`
	ZooKeeperPID           int     `json:"zookeeper_pid,omitempty"`
	BrokerCPU              float64 `json:"broker_cpu_seconds"`
	ZooKeeperCPU           float64 `json:"zookeeper_cpu_seconds"`
	PipelineCPU            float64 `json:"pipeline_cpu_seconds"`
	AccessesPerPipelineCPU float64 `json:"accesses_per_pipeline_cpu_second"`
	EntriesPerPipelineCPU  float64 `json:"entries_per_pipeline_cpu_second"`
	// Kafka traffic per second of the interval, from the clients' own
	// counters: produce from the generator's Writer, fetch and commit from
	// hotspotd's metrics. Bytes are record keys and values, uncompressed.
	ProduceRequestsPerSec float64 `json:"produce_requests_per_second"`
	BytesInPerSec         float64 `json:"produced_bytes_per_second"`
	FetchRequestsPerSec   float64 `json:"fetch_requests_per_second"`
	BytesOutPerSec        float64 `json:"fetched_bytes_per_second"`
	CommitRequestsPerSec  float64 `json:"offset_commit_requests_per_second"`

	MustReport int      `json:"must_report"`
	Found      int      `json:"found"`
	Reported   int      `json:"reported"`
	FalseHot   int      `json:"false_hot"`
	Precision  float64  `json:"precision"`
	Recall     float64  `json:"recall"`
	Missed     []string `json:"missed,omitempty"`
	False      []string `json:"false,omitempty"`
	DelayP50   float64  `json:"delay_p50_ms"`
	DelayP95   float64  `json:"delay_p95_ms"`
	DelayP99   float64  `json:"delay_p99_ms"`
	DelayMax   float64  `json:"delay_max_ms"`
	Slowest    string   `json:"slowest_key,omitempty"` // app/key of the longest delay

	// Crossing to the value served from the L1 of an app (a hotcache
	// client in this process, loading from a constant loader).
	L1Keys     int     `json:"l1_keys"`
	L1DelayP50 float64 `json:"l1_delay_p50_ms"`
	L1DelayP95 float64 `json:"l1_delay_p95_ms"`
	L1DelayP99 float64 `json:"l1_delay_p99_ms"`

	// Per key that had to be reported, its true crossing and its delays, so
	// that a slow key can be followed through hotspotd's log.
	Keys []keyDelay `json:"key_delays,omitempty"`
}

// keyDelay is one must-report key's crossing (Unix ms) and its delays from
// it to ZooKeeper and to an app's L1, in ms (-1: never seen there).
type keyDelay struct {
	Key       string  `json:"key"` // app/key
	CrossedMs int64   `json:"crossed_unix_ms"`
	ZKMs      float64 `json:"zookeeper_ms"`
	L1Ms      float64 `json:"l1_ms"`
}

// benchOptions is what the flags of hotspot bench ask for.
type benchOptions struct {
	w           *workload
	cfg         loadgen.Config // the workload
	servers     []string       // ZooKeeper
	hotspotds   []string       // HTTP addresses
	root        string         // ZooKeeper root
	zkAuth      zkgroup.Digest // HOTSPOT_ZK_DIGEST[_FILE]: an identity that may read the hot set
	settle      time.Duration
	jsonPath    string
	allowMissed bool
	rules       *rules.List // --rules: installed for the run's app (and ruleApps-1 more) before the workload
	ruleApps    int
	procs       []pipelineProc // the broker and ZooKeeper
	partitions  int            // the topic's, once it exists
}

func bench(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	o, err := parseBenchFlags(args, getenv, out)
	if err != nil {
		return err
	}
	if *o.w.inputOut != "" {
		return writeInputFile(out, o.cfg, *o.w.inputOut)
	}
	if _, err := scrapeAll(ctx, o.hotspotds); err != nil {
		return fmt.Errorf("%w: is hotspotd running? (--hotspotd)", err)
	}
	if m := topicMismatch(ctx, o.hotspotds, o.cfg.Topic); m != "" {
		return fmt.Errorf("the workload would never reach a detector: %s", m)
	}
	if o.partitions, err = o.w.ensureTopic(ctx, out, o.cfg); err != nil {
		return err
	}
	obs, err := startBenchObserver(ctx, o.servers, o.zkAuth, o.root, o.cfg.App, o.hotspotds)
	if err != nil {
		return err
	}
	defer obs.close()
	if o.rules != nil {
		undo, err := installBenchRules(ctx, out, obs.sess, o)
		if err != nil {
			return err
		}
		defer undo()
	}
	run, err := runBenchWorkload(ctx, out, o)
	if err != nil {
		return err
	}
	r := gradeBench(o, run, obs.stop())
	printBench(out, r)
	if err := writeBenchJSON(o.jsonPath, r); err != nil {
		return err
	}
	if err := measuredSomething(r, o.cfg); err != nil {
		return err
	}
	if err := fairRun(run.stats); err != nil {
		return err
	}
	return missedNone(r, o.allowMissed)
}

// parseBenchFlags reads the flags and fills in the defaults that depend on
// others: an app of the run's own and the planted accuracy probe.
func parseBenchFlags(args []string, getenv func(string) string, out io.Writer) (benchOptions, error) {
	fs := newFlags("bench", benchHelp)
	w := addWorkloadFlags(fs, 30*time.Second)
	w.getenv = getenv
	addrs := hotspotdFlag(fs, "HTTP addresses of every hotspotd, comma-separated (for CPU, memory and counts)")
	zkServers := fs.String("zk", "127.0.0.1:12181", "ZooKeeper servers, comma-separated")
	root := fs.String("zk-root", hotset.DefaultRoot, "ZooKeeper root of Hotspot")
	settle := fs.Duration("settle", 3*time.Second, "wait after the workload for the pipeline to drain")
	jsonPath := fs.String("json", "", "also write the report as JSON to this `FILE`")
	allowMissed := fs.Bool("allow-missed", false, "exit 0 even when keys that had to be reported were missed (for exploring)")
	rulesPath := fs.String("rules", "", "install the rule list in `FILE` (JSON, as PUT /v1/rules takes) for the run's app before the workload, and delete it after")
	ruleApps := fs.Int("rules-apps", 1, "with --rules, also install the list for this many apps in all (the run's app and <app>-rN without traffic)")
	stackDir := fs.String("stack-dir", ".stack", "`DIR` of the local stack's pid files (kafka.pid, zookeeper.pid), for the broker's and ZooKeeper's CPU")
	brokerPid := fs.Int("broker-pid", 0, "`PID` of the Kafka broker (default: from --stack-dir)")
	zkPid := fs.Int("zk-pid", 0, "`PID` of ZooKeeper (default: from --stack-dir)")
	fs.SetOutput(out)
	if err := parseFlags(fs, args, getenv); err != nil {
		return benchOptions{}, err
	}
	if *w.app == "" && *w.apps == 1 {
		*w.app = "bench-" + time.Now().UTC().Format("150405.000")
	}
	if *w.planted == "" && len(w.flashes) == 0 {
		// The accuracy probe: planted keys spread over every partition
		// (records are not keyed), starting once the run is steady.
		for _, m := range []string{"0.5", "0.8", "1.2", "2", "10"} {
			w.flashes = append(w.flashes, fmt.Sprintf("planted:%sx@3s=%sx", m, m))
		}
	}
	cfg, err := w.config()
	if err != nil {
		return benchOptions{}, err
	}
	o := benchOptions{w: w, cfg: cfg, servers: envflag.SplitList(*zkServers), hotspotds: envflag.SplitList(*addrs),
		root: *root, settle: *settle, jsonPath: *jsonPath, allowMissed: *allowMissed, ruleApps: *ruleApps}
	if *rulesPath != "" {
		if cfg.Apps != 1 {
			return o, usagef("--rules needs a single app (--apps 1)")
		}
		b, err := os.ReadFile(*rulesPath)
		if err != nil {
			return o, usageError{err}
		}
		if o.rules, err = rules.Decode(b); err != nil {
			return o, usagef("--rules %s: %v", *rulesPath, err)
		}
		if o.ruleApps < 1 {
			return o, usagef("--rules-apps must be >= 1")
		}
	}
	if len(o.servers) == 0 || len(o.hotspotds) == 0 {
		return o, usagef("--zk and --hotspotd need at least one address each")
	}
	if o.zkAuth, err = zkgroup.DigestFromEnv(getenv, "HOTSPOT_ZK_DIGEST"); err != nil {
		return o, usageError{err}
	}
	if *brokerPid < 0 || *zkPid < 0 {
		return o, usagef("--broker-pid and --zk-pid must be >= 0")
	}
	if o.procs, err = findPipelineProcs(*stackDir, *brokerPid, *zkPid); err != nil {
		return o, err
	}
	return o, nil
}

// rulesSettle is how long installBenchRules waits for every hotspotd to
// apply the rules (they do within 1 s).
const rulesSettle = 2 * time.Second

// installBenchRules writes o.rules as the rule node of the run's app and of
// o.ruleApps-1 more apps, waits for the hotspotds to apply them, and
// returns a func that deletes them again.
func installBenchRules(ctx context.Context, out io.Writer, sess *zkgroup.Session, o benchOptions) (func(), error) {
	st := rulestore.New(sess, o.root)
	apps := []string{o.cfg.App}
	for i := 1; i < o.ruleApps; i++ {
		apps = append(apps, fmt.Sprintf("%s-r%d", o.cfg.App, i))
	}
	undo := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, app := range apps {
			_ = st.Delete(dctx, app, 0) // best effort: the run is over
		}
	}
	for _, app := range apps {
		l := *o.rules
		l.App, l.Version = app, 0
		if _, err := st.Put(ctx, &l); err != nil {
			undo()
			return nil, fmt.Errorf("--rules: installing the rules of %s: %w", app, err)
		}
	}
	fmt.Fprintf(out, "hotspot bench: %d rules installed for %d apps\n", len(o.rules.Rules), len(apps))
	select {
	case <-ctx.Done():
		undo()
		return nil, ctx.Err()
	case <-time.After(rulesSettle):
	}
	return undo, nil
}

// benchRun is the workload's outcome and the hotspotd metrics around it.
type benchRun struct {
	stats               loadgen.Stats
	before, after       []map[string]float64 // per hotspotd, before the run and after the settle time
	cpuBefore, cpuAfter []float64            // per benchOptions.procs, the same moments
	interval            time.Duration        // from before to after
}

// runBenchWorkload runs the workload, printing a progress line a second,
// then waits o.settle for the pipeline to drain.
func runBenchWorkload(ctx context.Context, out io.Writer, o benchOptions) (benchRun, error) {
	var run benchRun
	var err error
	if run.before, err = scrapeAll(ctx, o.hotspotds); err != nil {
		return run, err
	}
	run.cpuBefore = sampleCPU(o.procs)
	began := time.Now()
	cfg := o.cfg
	fmt.Fprintf(out, "hotspot bench: %s records, %.0f background events/s over %d keys (s=%.2f), app %s, %v, topic %s (%d partitions)\n",
		cfg.Form, cfg.Rate, cfg.Keys, cfg.Skew, cfg.App, cfg.Duration, cfg.Topic, o.partitions)
	var prev loadgen.Stats
	cfg.Progress = func(s loadgen.Stats) { printProgress(out, prev, s); prev = s }
	if run.stats, err = loadgen.Run(ctx, cfg); err != nil {
		return run, err
	}
	select {
	case <-ctx.Done():
		return run, ctx.Err()
	case <-time.After(o.settle):
	}
	run.after, err = scrapeAll(ctx, o.hotspotds)
	run.cpuAfter = sampleCPU(o.procs)
	run.interval = time.Since(began)
	return run, err
}

// gradeBench scores what the observer saw against the workload's truth and
// adds the hotspotd processes' own counts over the run.
func gradeBench(o benchOptions, run benchRun, seen observed) benchResult {
	st := run.stats
	delta := func(name string) float64 {
		var d float64
		for i := range run.after {
			d += run.after[i][name] - run.before[i][name]
		}
		return d
	}
	rep := score.Grade(st.Truth, seen.published, score.Config{Threshold: o.cfg.Threshold})
	r := benchResult{
		Workload: st.Truth.Workload, Form: o.cfg.Form.String(), Seconds: st.Elapsed.Seconds(),
		Events: st.Events, Records: st.Records, Entries: st.Entries, FailedEvent: st.FailedEvents,
		MaxLagMs:    st.MaxLag.Milliseconds(),
		DetRecords:  delta("hotspot_detector_records_total"),
		DetEntries:  delta("hotspot_detector_entries_total"),
		HotspotdCPU: delta("process_cpu_seconds_total"),
		MaxRSSBytes: seen.maxRSS,
		Invalid:     delta("hotspot_events_invalid_total"),
		Dropped:     delta("hotspot_input_dropped_total"),
		MustReport:  rep.MustReport, Found: rep.Found, Reported: rep.Reported, FalseHot: rep.FalseHot,
		Precision: rep.Precision, Recall: rep.Recall,
		DelayP50: ms(rep.P50), DelayP95: ms(rep.P95), DelayP99: ms(rep.P99), DelayMax: ms(rep.Max),
	}
	if rep.Found > 0 {
		r.Slowest = rep.Slowest.App + "/" + rep.Slowest.Key
	}
	if r.HotspotdCPU > 0 {
		r.EntriesPerCPU = r.DetEntries / r.HotspotdCPU
		r.RecordsPerCPU = r.DetRecords / r.HotspotdCPU
	}
	r.EntriesPerSecond = r.DetEntries / (st.Elapsed + o.settle).Seconds()
	gradePipeline(&r, o, run, delta)
	r.LagMax, r.LagFirstHalf, r.LagSecondHalf = lagFigures(seen.lag)
	l1 := score.Grade(st.Truth, seen.inL1, score.Config{Threshold: o.cfg.Threshold})
	r.L1Keys = l1.Found
	r.L1DelayP50, r.L1DelayP95, r.L1DelayP99 = ms(l1.P50), ms(l1.P95), ms(l1.P99)
	r.Keys = keyDelays(st.Truth, o.cfg.Threshold, seen)
	for _, k := range rep.Missed {
		r.Missed = append(r.Missed, k.App+"/"+k.Key)
	}
	for _, k := range rep.False {
		r.False = append(r.False, k.App+"/"+k.Key)
	}
	return r
}

// keyDelays lists, by crossing, every key whose true rate reached 1.2 times
// threshold (the keys graded for recall) with its delays.
func keyDelays(truth *loadgen.Truth, threshold float64, seen observed) []keyDelay {
	crossed := truth.Crossings(threshold, time.Second)
	var out []keyDelay
	for k, m := range truth.MaxRate(time.Second) {
		at, ok := crossed[k]
		if m < 1.2*threshold || !ok {
			continue
		}
		d := keyDelay{Key: k.App + "/" + k.Key, CrossedMs: at.UnixMilli(), ZKMs: -1, L1Ms: -1}
		if t, ok := seen.published[k]; ok {
			d.ZKMs = ms(max(t.Sub(at), 0))
		}
		if t, ok := seen.inL1[k]; ok {
			d.L1Ms = ms(max(t.Sub(at), 0))
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b keyDelay) int {
		return cmp.Or(cmp.Compare(a.CrossedMs, b.CrossedMs), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// gradePipeline adds the broker's and ZooKeeper's CPU and the Kafka traffic
// to r, which holds hotspotd's figures already.
func gradePipeline(r *benchResult, o benchOptions, run benchRun, delta func(string) float64) {
	r.IntervalSeconds = run.interval.Seconds()
	r.BrokerCPU, r.ZooKeeperCPU = -1, -1
	r.PipelineCPU = r.HotspotdCPU
	for i, p := range o.procs {
		cpu := -1.0
		if run.cpuBefore[i] >= 0 && run.cpuAfter[i] >= 0 {
			cpu = run.cpuAfter[i] - run.cpuBefore[i]
			r.PipelineCPU += cpu
		}
		switch p.name {
		case "kafka":
			r.BrokerCPU, r.BrokerPID = cpu, p.pid
		case "zookeeper":
			r.ZooKeeperCPU, r.ZooKeeperPID = cpu, p.pid
		}
	}
	if r.PipelineCPU > 0 {
		r.AccessesPerPipelineCPU = float64(r.Events) / r.PipelineCPU
		r.EntriesPerPipelineCPU = r.DetEntries / r.PipelineCPU
	}
	if sec := r.IntervalSeconds; sec > 0 {
		r.ProduceRequestsPerSec = float64(run.stats.ProduceRequests) / sec
		r.BytesInPerSec = float64(run.stats.Bytes) / sec
		r.FetchRequestsPerSec = delta("hotspot_kafka_fetch_requests_total") / sec
		r.BytesOutPerSec = delta("hotspot_kafka_fetched_bytes_total") / sec
		r.CommitRequestsPerSec = delta("hotspot_kafka_offset_commit_requests_total") / sec
	}
}

// writeBenchJSON writes r to path; "" writes nothing.
func writeBenchJSON(path string, r benchResult) error {
	if path == "" {
		return nil
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// measuredSomething reports a run whose workload never reached the
// detectors: they counted nothing while it ran, so every figure is empty.
func measuredSomething(r benchResult, cfg loadgen.Config) error {
	if r.Records > 0 && (r.DetRecords == 0 || r.DetEntries == 0) {
		hint := ""
		if needsInputFile(cfg.Form) {
			hint = fmt.Sprintf(" Does it read %s records with their input file (--input-out FILE writes it; hotspotd --input FILE)?", cfg.Form)
		}
		return fmt.Errorf("measured nothing: the workload sent %d records to topic %q, but the detectors counted %.0f records and %.0f entries meanwhile; does a hotspotd of --hotspotd consume that topic?%s",
			r.Records, cfg.Topic, r.DetRecords, r.DetEntries, hint)
	}
	return nil
}

// missedNone reports keys that had to be reported and were not, unless
// allowed.
func missedNone(r benchResult, allowed bool) error {
	if len(r.Missed) == 0 || allowed {
		return nil
	}
	return fmt.Errorf("missed %d of %d keys that had to be reported (>= 1.2x the threshold): %v (--allow-missed accepts misses)",
		len(r.Missed), r.MustReport, r.Missed)
}

// fairRun reports a run in which the generator could not keep its schedule.
func fairRun(st loadgen.Stats) error {
	if st.FailedEvents > 0 || st.MaxLag > time.Second {
		return fmt.Errorf("the generator failed %d events or fell %v behind: the run is not a fair measurement", st.FailedEvents, st.MaxLag)
	}
	return nil
}

// lagFigures returns the largest sample and the means of the first and the
// second half of the samples.
func lagFigures(lag []float64) (maxLag, first, second float64) {
	mean := func(xs []float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		var s float64
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	for _, x := range lag {
		maxLag = max(maxLag, x)
	}
	return maxLag, mean(lag[:len(lag)/2]), mean(lag[len(lag)/2:])
}

// cpuText is a process's CPU seconds for the report.
func cpuText(cpu float64, pid int) string {
	if cpu < 0 {
		return "not measured (no pid: --broker-pid, --zk-pid or --stack-dir)"
	}
	return fmt.Sprintf("%.2f (pid %d)", cpu, pid)
}

// maxKeyLines is how many keys the text report lists one by one (the JSON
// lists every key).
const maxKeyLines = 10

func delayText(ms float64) string {
	if ms < 0 {
		return "never"
	}
	return fmt.Sprintf("+%.0f ms", ms)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func printBench(out io.Writer, r benchResult) {
	fmt.Fprintf(out, "\n== hotspot bench report ==\n")
	fmt.Fprintf(out, "workload      %s, %.1f s: %d events, %d records, %d entries (%.0f events/s)\n",
		r.Form, r.Seconds, r.Events, r.Records, r.Entries, float64(r.Events)/r.Seconds)
	fmt.Fprintf(out, "detectors     %.0f records, %.0f entries counted, %.0f invalid; %.0f entries/s wall\n",
		r.DetRecords, r.DetEntries, r.Invalid, r.EntriesPerSecond)
	if f, _ := loadgen.ParseForm(r.Form); r.Dropped > 0 || needsInputFile(f) {
		fmt.Fprintf(out, "input file    %.0f lines dropped (hotspot_input_dropped_total)\n", r.Dropped)
	}
	fmt.Fprintf(out, "hotspotd CPU  %.2f s: %.0f entries and %.0f records per CPU-second\n",
		r.HotspotdCPU, r.EntriesPerCPU, r.RecordsPerCPU)
	fmt.Fprintf(out, "pipeline CPU  %.2f s over %.1f s: hotspotd %.2f, Kafka broker %s, ZooKeeper %s\n",
		r.PipelineCPU, r.IntervalSeconds, r.HotspotdCPU, cpuText(r.BrokerCPU, r.BrokerPID), cpuText(r.ZooKeeperCPU, r.ZooKeeperPID))
	fmt.Fprintf(out, "              %.0f accesses and %.0f entries per pipeline CPU-second\n",
		r.AccessesPerPipelineCPU, r.EntriesPerPipelineCPU)
	fmt.Fprintf(out, "Kafka         in %.0f produce requests/s, %.1f MB/s; out %.0f fetch requests/s, %.1f MB/s; %.0f offset commits/s\n",
		r.ProduceRequestsPerSec, r.BytesInPerSec/1e6, r.FetchRequestsPerSec, r.BytesOutPerSec/1e6, r.CommitRequestsPerSec)
	fmt.Fprintf(out, "consumer lag  max %.0f records; mean %.0f over the first half of the run, %.0f over the second\n",
		r.LagMax, r.LagFirstHalf, r.LagSecondHalf)
	fmt.Fprintf(out, "memory        max resident %.1f MB per hotspotd\n", r.MaxRSSBytes/1e6)
	fmt.Fprintf(out, "accuracy      recall %.3f (%d of %d keys >= 1.2x), precision %.3f (%d of %d published keys were <= 0.8x)\n",
		r.Recall, r.Found, r.MustReport, r.Precision, r.FalseHot, r.Reported)
	slowest := ""
	if r.Slowest != "" {
		slowest = "; slowest " + r.Slowest
	}
	fmt.Fprintf(out, "delay         crossing -> ZooKeeper: p50 %.0f ms, p95 %.0f ms, p99 %.0f ms, max %.0f ms (%d keys%s)\n",
		r.DelayP50, r.DelayP95, r.DelayP99, r.DelayMax, r.Found, slowest)
	fmt.Fprintf(out, "              crossing -> an app's L1: p50 %.0f ms, p95 %.0f ms, p99 %.0f ms (%d keys)\n",
		r.L1DelayP50, r.L1DelayP95, r.L1DelayP99, r.L1Keys)
	if len(r.Keys) <= maxKeyLines {
		for _, k := range r.Keys {
			fmt.Fprintf(out, "              %s crossed at %s: ZooKeeper %s, L1 %s\n", k.Key,
				time.UnixMilli(k.CrossedMs).UTC().Format("15:04:05.000"), delayText(k.ZKMs), delayText(k.L1Ms))
		}
	}
	if len(r.Missed) > 0 {
		fmt.Fprintf(out, "missed        %v\n", r.Missed)
	}
	if len(r.False) > 0 {
		fmt.Fprintf(out, "false hot     %v\n", r.False)
	}
}
