package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/hotspot-dev/hotspot/hotcache"
	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/score"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

const benchHelp = `
Runs a workload against a running cluster and reports what it achieved:
throughput (wall, and per CPU-second of the hotspotd processes), detection
delay from each key's true threshold crossing (the generator's send log) to
its publication in ZooKeeper and to its value in the L1 of an app (a hotcache
client embedded in this command), precision and recall against the ground truth,
and the hotspotd processes' resident memory.

It takes the workload flags of hotspot load (see hotspot load --help for the
flash syntax); the run uses an app of its own (default bench-<time>) so keys
hot before the run do not count. By default it plants keys at 0.5, 0.8, 1.2,
2 and 10 times the threshold, starting 3 s into the run.

Examples:
  hotspot bench --rate 200000 --duration 30s
  hotspot bench --form json --rate 100000 --skew 0.8 --duration 20s --json bench.json`

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
	Invalid          float64 `json:"invalid_records"`

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

	// Crossing to the value served from the L1 of an app (a hotcache
	// client in this process, loading from a constant loader).
	L1Keys     int     `json:"l1_keys"`
	L1DelayP50 float64 `json:"l1_delay_p50_ms"`
	L1DelayP95 float64 `json:"l1_delay_p95_ms"`
	L1DelayP99 float64 `json:"l1_delay_p99_ms"`
}

func bench(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := newFlags("bench", benchHelp)
	w := addWorkloadFlags(fs, 30*time.Second)
	addrs := fs.String("hotspotd", "127.0.0.1:7070", "HTTP addresses of every hotspotd, comma-separated (for CPU, memory and counts)")
	zkServers := fs.String("zk", "127.0.0.1:12181", "ZooKeeper servers, comma-separated")
	root := fs.String("zk-root", hotset.DefaultRoot, "ZooKeeper root of Hotspot")
	settle := fs.Duration("settle", 3*time.Second, "wait after the workload for the pipeline to drain")
	jsonPath := fs.String("json", "", "also write the report as JSON to this `FILE`")
	fs.SetOutput(out)
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
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
		return err
	}
	servers, hotspotds := envflag.SplitList(*zkServers), envflag.SplitList(*addrs)
	if len(servers) == 0 || len(hotspotds) == 0 {
		return usagef("--zk and --hotspotd need at least one address each")
	}
	if _, err := scrapeAll(ctx, hotspotds); err != nil {
		return fmt.Errorf("%w: is hotspotd running? (--hotspotd)", err)
	}
	if _, err := w.ensureTopic(ctx, cfg); err != nil {
		return err
	}

	// Follow the published hot set, recording when each key first appeared.
	connectCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	sess, err := zkgroup.Connect(connectCtx, servers, zkgroup.Config{})
	cancel()
	if err != nil {
		return fmt.Errorf("no ZooKeeper session with %v: %w", servers, err)
	}
	defer sess.Close()
	var mu sync.Mutex
	seen := make(map[loadgen.AppKey]time.Time)
	watcher, err := hotwatch.New(sess, hotwatch.Config{Root: *root, OnChange: func(c hotwatch.Change) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range c.Added {
			ak := loadgen.AppKey{App: c.App, Key: k.Key}
			if _, ok := seen[ak]; !ok {
				seen[ak] = c.At
			}
		}
	}})
	if err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { watcher.Run(watchCtx) })
	<-watcher.Ready()

	// An app of the workload's app, as an SDK user would embed it: it
	// watches the hot set and loads each promoted key into its L1 (from a
	// constant loader: the load itself is not what is measured).
	app, err := hotcache.New(ctx, hotcache.WithApp(*w.app), hotcache.WithZooKeeper(servers, *root),
		hotcache.WithLoader(hotcache.LoaderFunc(func(context.Context, string) ([]byte, error) { return []byte("v"), nil })))
	if err != nil {
		return fmt.Errorf("hotcache client: %w", err)
	}
	defer app.Close()
	inL1 := make(map[loadgen.AppKey]time.Time)
	wg.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-watchCtx.Done():
				return
			case now := <-t.C:
				mu.Lock()
				for _, k := range app.Hot() {
					ak := loadgen.AppKey{App: *w.app, Key: k.Key}
					if _, ok := inL1[ak]; !ok && k.Loaded {
						inL1[ak] = now
					}
				}
				mu.Unlock()
			}
		}
	})

	// Resident memory, sampled every second.
	var maxRSS float64
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			ms, _ := scrapeAll(watchCtx, hotspotds)
			mu.Lock()
			for _, m := range ms {
				maxRSS = max(maxRSS, m["process_resident_memory_bytes"])
			}
			mu.Unlock()
			select {
			case <-watchCtx.Done():
				return
			case <-t.C:
			}
		}
	})

	before, err := scrapeAll(ctx, hotspotds)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "hotspot bench: %s records, %.0f background events/s over %d keys (s=%.2f), app %s, %v\n",
		cfg.Form, cfg.Rate, cfg.Keys, cfg.Skew, *w.app, cfg.Duration)
	var prev loadgen.Stats
	cfg.Progress = func(s loadgen.Stats) { printProgress(out, prev, s); prev = s }
	st, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(*settle):
	}
	after, err := scrapeAll(ctx, hotspotds)
	if err != nil {
		return err
	}
	stopWatch()
	mu.Lock()
	defer mu.Unlock()

	delta := func(name string) float64 {
		var d float64
		for i := range after {
			d += after[i][name] - before[i][name]
		}
		return d
	}
	rep := score.Grade(st.Truth, seen, score.Config{Threshold: cfg.Threshold})
	r := benchResult{
		Workload: st.Truth.Workload, Form: cfg.Form.String(), Seconds: st.Elapsed.Seconds(),
		Events: st.Events, Records: st.Records, Entries: st.Entries, FailedEvent: st.FailedEvents,
		MaxLagMs:    st.MaxLag.Milliseconds(),
		DetRecords:  delta("hotspot_detector_records_total"),
		DetEntries:  delta("hotspot_detector_entries_total"),
		HotspotdCPU: delta("process_cpu_seconds_total"),
		MaxRSSBytes: maxRSS,
		Invalid:     delta("hotspot_events_invalid_total"),
		MustReport:  rep.MustReport, Found: rep.Found, Reported: rep.Reported, FalseHot: rep.FalseHot,
		Precision: rep.Precision, Recall: rep.Recall,
		DelayP50: ms(rep.P50), DelayP95: ms(rep.P95), DelayP99: ms(rep.P99), DelayMax: ms(rep.Max),
	}
	if r.HotspotdCPU > 0 {
		r.EntriesPerCPU = r.DetEntries / r.HotspotdCPU
		r.RecordsPerCPU = r.DetRecords / r.HotspotdCPU
	}
	r.EntriesPerSecond = r.DetEntries / (st.Elapsed + *settle).Seconds()
	l1 := score.Grade(st.Truth, inL1, score.Config{Threshold: cfg.Threshold})
	r.L1Keys = l1.Found
	r.L1DelayP50, r.L1DelayP95, r.L1DelayP99 = ms(l1.P50), ms(l1.P95), ms(l1.P99)
	for _, k := range rep.Missed {
		r.Missed = append(r.Missed, k.App+"/"+k.Key)
	}
	for _, k := range rep.False {
		r.False = append(r.False, k.App+"/"+k.Key)
	}
	printBench(out, r)
	if *jsonPath != "" {
		b, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if st.FailedEvents > 0 || st.MaxLag > time.Second {
		return fmt.Errorf("the generator failed %d events or fell %v behind: the run is not a fair measurement", st.FailedEvents, st.MaxLag)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func printBench(out io.Writer, r benchResult) {
	fmt.Fprintf(out, "\n== hotspot bench report ==\n")
	fmt.Fprintf(out, "workload      %s, %.1f s: %d events, %d records, %d entries (%.0f events/s)\n",
		r.Form, r.Seconds, r.Events, r.Records, r.Entries, float64(r.Events)/r.Seconds)
	fmt.Fprintf(out, "detectors     %.0f records, %.0f entries counted, %.0f invalid; %.0f entries/s wall\n",
		r.DetRecords, r.DetEntries, r.Invalid, r.EntriesPerSecond)
	fmt.Fprintf(out, "hotspotd CPU  %.2f s: %.0f entries and %.0f records per CPU-second\n",
		r.HotspotdCPU, r.EntriesPerCPU, r.RecordsPerCPU)
	fmt.Fprintf(out, "memory        max resident %.1f MB per hotspotd\n", r.MaxRSSBytes/1e6)
	fmt.Fprintf(out, "accuracy      recall %.3f (%d of %d keys >= 1.2x), precision %.3f (%d of %d published keys were <= 0.8x)\n",
		r.Recall, r.Found, r.MustReport, r.Precision, r.FalseHot, r.Reported)
	fmt.Fprintf(out, "delay         crossing -> ZooKeeper: p50 %.0f ms, p95 %.0f ms, p99 %.0f ms, max %.0f ms (%d keys)\n",
		r.DelayP50, r.DelayP95, r.DelayP99, r.DelayMax, r.Found)
	fmt.Fprintf(out, "              crossing -> an app's L1: p50 %.0f ms, p95 %.0f ms, p99 %.0f ms (%d keys)\n",
		r.L1DelayP50, r.L1DelayP95, r.L1DelayP99, r.L1Keys)
	if len(r.Missed) > 0 {
		fmt.Fprintf(out, "missed        %v\n", r.Missed)
	}
	if len(r.False) > 0 {
		fmt.Fprintf(out, "false hot     %v\n", r.False)
	}
}
