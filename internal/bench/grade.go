package bench

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/score"
)

// grade scores what the observer saw against the workload's truth and
// adds the hotspotd processes' own counts over the run.
func grade(cfg Config, run workloadRun, seen observed) Result {
	st := run.stats
	delta := func(name string) float64 {
		var d float64
		for i := range run.after {
			d += run.after[i][name] - run.before[i][name]
		}
		return d
	}
	rep := score.Grade(st.Truth, seen.published, score.Config{Threshold: cfg.Workload.Threshold})
	r := Result{
		Workload: st.Truth.Workload, Form: cfg.Workload.Form.String(), Seconds: st.Elapsed.Seconds(),
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
	r.EntriesPerSecond = r.DetEntries / (st.Elapsed + cfg.Settle).Seconds()
	gradePipeline(&r, cfg, run, delta)
	r.LagMax, r.LagFirstHalf, r.LagSecondHalf = lagFigures(seen.lag)
	l1 := score.Grade(st.Truth, seen.inL1, score.Config{Threshold: cfg.Workload.Threshold})
	r.L1Keys = l1.Found
	r.L1DelayP50, r.L1DelayP95, r.L1DelayP99 = ms(l1.P50), ms(l1.P95), ms(l1.P99)
	r.Keys = keyDelays(st.Truth, cfg.Workload.Threshold, seen)
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
func keyDelays(truth *loadgen.Truth, threshold float64, seen observed) []KeyDelay {
	crossed := truth.Crossings(threshold, time.Second)
	var out []KeyDelay
	for k, m := range truth.MaxRate(time.Second) {
		at, ok := crossed[k]
		if m < 1.2*threshold || !ok {
			continue
		}
		d := KeyDelay{Key: k.App + "/" + k.Key, CrossedMs: at.UnixMilli(), ZKMs: -1, L1Ms: -1}
		if t, ok := seen.published[k]; ok {
			d.ZKMs = ms(max(t.Sub(at), 0))
		}
		if t, ok := seen.inL1[k]; ok {
			d.L1Ms = ms(max(t.Sub(at), 0))
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b KeyDelay) int {
		return cmp.Or(cmp.Compare(a.CrossedMs, b.CrossedMs), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// gradePipeline adds the broker's and ZooKeeper's CPU and the Kafka traffic
// to r, which holds hotspotd's figures already.
func gradePipeline(r *Result, cfg Config, run workloadRun, delta func(string) float64) {
	r.IntervalSeconds = run.interval.Seconds()
	r.BrokerCPU, r.ZooKeeperCPU = -1, -1
	r.PipelineCPU = r.HotspotdCPU
	for i, p := range cfg.Procs {
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

// measuredSomething reports a run whose workload never reached the
// detectors: they counted nothing while it ran, so every figure is empty.
func measuredSomething(r Result, cfg loadgen.Config) error {
	if r.Records > 0 && (r.DetRecords == 0 || r.DetEntries == 0) {
		hint := ""
		if cfg.Form.NeedsInputFile() {
			hint = fmt.Sprintf(" Does it read %s records with their input file (--input-out FILE writes it; hotspotd --input FILE)?", cfg.Form)
		}
		return fmt.Errorf("measured nothing: the workload sent %d records to topic %q, but the detectors counted %.0f records and %.0f entries meanwhile; does a hotspotd of --hotspotd consume that topic?%s",
			r.Records, cfg.Topic, r.DetRecords, r.DetEntries, hint)
	}
	return nil
}

// missedNone reports keys that had to be reported and were not, unless
// allowed.
func missedNone(r Result, allowed bool) error {
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
