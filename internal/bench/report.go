package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hotspot-dev/hotspot/internal/loadgen"
)

// Result is what hotspot bench reports (and writes with --json).
type Result struct {
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
	Keys []KeyDelay `json:"key_delays,omitempty"`
}

// KeyDelay is one must-report key's crossing (Unix ms) and its delays from
// it to ZooKeeper and to an app's L1, in ms (-1: never seen there).
type KeyDelay struct {
	Key       string  `json:"key"` // app/key
	CrossedMs int64   `json:"crossed_unix_ms"`
	ZKMs      float64 `json:"zookeeper_ms"`
	L1Ms      float64 `json:"l1_ms"`
}

// writeJSON writes r to path; "" writes nothing.
func writeJSON(path string, r Result) error {
	if path == "" {
		return nil
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	return os.WriteFile(path, append(b, '\n'), 0o644)
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

func printReport(out io.Writer, r Result) {
	fmt.Fprintf(out, "\n== hotspot bench report ==\n")
	fmt.Fprintf(out, "workload      %s, %.1f s: %d events, %d records, %d entries (%.0f events/s)\n",
		r.Form, r.Seconds, r.Events, r.Records, r.Entries, float64(r.Events)/r.Seconds)
	fmt.Fprintf(out, "detectors     %.0f records, %.0f entries counted, %.0f invalid; %.0f entries/s wall\n",
		r.DetRecords, r.DetEntries, r.Invalid, r.EntriesPerSecond)
	if f, _ := loadgen.ParseForm(r.Form); r.Dropped > 0 || f.NeedsInputFile() {
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
