package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
)

const loadHelp = `
Produces a synthetic access workload to Kafka: Zipf-distributed background
keys plus planted keys (flash crowds, or fixed rates for accuracy tests), as
JSON records, newline-separated JSON or the SDK's binary batches, or as access
logs that hotspotd reads through an input file (combined log lines, or a
service's JSON objects). It creates the topic if it is missing, prints a
progress line a second and a summary, and with --truth writes the ground truth
(events sent per key per 100 ms) for hotspot bench to score against. Ctrl-C or
SIGTERM stops it cleanly. It warns when the hotspotd at --hotspotd consumes
another topic than --topic.

Record forms (--form):
    binary       the SDK's binary batches (default)
    json         one hotspot JSON event per record
    ndjson       --lines (default 100) such events per record
    combined     nginx/Apache combined log lines, one per record (or --lines):
                 127.0.0.1 - APP [TIME] "GET /APP/KEY HTTP/1.1" 200 512 "-" "hotspot-load"
    mapped-json  a service's JSON access log, one object per record (or --lines):
                 {"ts_ms":..,"service":APP,"request":{"method":"GET","uri":"/item/KEY",..},..}
hotspotd reads combined and mapped-json only through an input file that maps
them back to (app, key): --input-out FILE writes it for --form and --topic
(and produces nothing); start hotspotd with --input FILE before the workload.
Keys and apps that a combined line cannot carry as they are (spaces, control
characters, '"', '?', '\'; '/' in an app) are refused.

Sources (--sources N): the accesses come from N app instances, each access
from one drawn uniformly (or Zipf-distributed with --source-skew S, inst-0
the busiest), and say so: binary writes a version 3 batch per instance,
json and ndjson add "src":"inst-I", combined and mapped-json name the
client 10.x.y.z (instance I is the address I+1), which their input file
(--input-out) maps with --sources. A flash may give one instance a fixed
share of its key (~SOURCE:SHARE below). The truth keeps the planted keys'
events per source, to compare with hotspotd's sources of a hot key.

Flash crowds (--flash, repeatable; several specs may share one value,
separated by spaces):
    [APP/]KEY@START[+RAMP][..END]=RATE[x][~SOURCE:SHARE]
  e.g. item:hot@10s+2s=3000 (ramps from 0 at 10s to 3000/s at 12s, then holds),
       shop/cart:7@0s..30s=1.2x (1.2 x --threshold from the start to 30s),
       item:42@0s=2x~inst-0:0.7 (with --sources: inst-0 sends 70 % of it).
  START, RAMP and END are offsets from the start; RATE is events/s, or a
  multiple of --threshold with a trailing x; SHARE is a fraction or N%.
  See docs/loadgen.md.

Examples:
  hotspot load --duration 30s --flash 'item:hot@10s+2s=3000' --truth /tmp/truth.json
  hotspot load --rate 200000 --form binary --duration 20s
  hotspot load --rate 0 --planted 0.5,0.8,1.2,2,10 --duration 60s --truth t.json
  hotspot load --form combined --topic access.nginx --input-out nginx.yaml   # then hotspotd --input nginx.yaml
  hotspot load --form combined --topic access.nginx --duration 30s
  hotspot load --sources 20 --flash 'item:42@0s=2x~inst-0:0.7' --truth t.json
`

// flashFlag collects --flash specs; they are parsed once --threshold is known.
type flashFlag []string

func (f *flashFlag) String() string { return strings.Join(*f, " ") }

func (f *flashFlag) Set(v string) error {
	*f = append(*f, strings.Fields(v)...)
	return nil
}

func runLoad(ctx context.Context, args []string) error {
	return load(ctx, args, os.Getenv, os.Stdout)
}

// workload holds the flags that describe a generated workload; hotspot
// load and hotspot bench share them.
type workload struct {
	flashes              flashFlag
	brokers, topic       *string
	partitions           *int
	replicas             *int
	rate                 *float64
	keys                 *uint64
	skew                 *float64
	apps                 *int
	app, prefix, planted *string
	plantedApp           *string
	threshold            *float64
	duration             *time.Duration
	formName             *string
	lines, entries       *int
	flush, tick          *time.Duration
	seed                 *uint64
	compression          *string
	batchTimeout         *time.Duration
	early                *uint64
	sources              *int
	sourceSkew           *float64
	hideSources          *bool
	inputOut             *string
	kafka                *kafkaio.SecurityFlags
	getenv               func(string) string // HOTSPOT_KAFKA_PASSWORD; nil means os.Getenv
}

func addWorkloadFlags(fs *flag.FlagSet, duration time.Duration) *workload {
	w := &workload{}
	w.brokers = fs.String("brokers", "127.0.0.1:19092", "Kafka bootstrap brokers, comma-separated")
	w.topic = fs.String("topic", hotset.DefaultTopic, "topic to write")
	w.partitions = fs.Int("partitions", 8, "partitions of the topic when it has to be created")
	w.replicas = fs.Int("replication-factor", 0, "replication factor of the topic when it has to be created; 0 takes the brokers'\ndefault.replication.factor")
	w.rate = fs.Float64("rate", 50_000, "background events/s over all keys; 0 for planted keys only")
	w.keys = fs.Uint64("keys", 1_000_000, "distinct background keys")
	w.skew = fs.Float64("skew", 1.1, "Zipf exponent s > 0 (P(rank k) ∝ k^-s); 0.8 and 1.1 are typical")
	w.apps = fs.Int("apps", 1, "background apps app0..appN-1; rank r goes to app (r-1) mod N")
	w.app = fs.String("app", "", "name of the single app when --apps is 1 (default app0)")
	w.prefix = fs.String("key-prefix", "k:", "background key of rank r is PREFIX<r>")
	fs.Var(&w.flashes, "flash", "flash crowd or planted key, `SPEC` (repeatable; syntax above)")
	w.planted = fs.String("planted", "", "fixed-rate planted keys at these `MULTIPLES` of --threshold, e.g. 0.5,0.8,1.2,2,10,\nnamed planted:<m>x")
	w.plantedApp = fs.String("planted-app", "", "app of the --planted keys (default the first app)")
	w.threshold = fs.Float64("threshold", 1000, "hot threshold the run is scored against, events/s: the truth keeps\nbackground keys expected at >= 0.3x it; RATEx in flash specs multiplies it")
	w.duration = fs.Duration("duration", duration, "how long to run; 0 runs until interrupted")
	w.formName = fs.String("form", "binary", "record `FORM`: binary (SDK batches), json (one object per record), ndjson,\ncombined (combined log lines) or mapped-json (a service's JSON access log); see above")
	w.lines = fs.Int("lines", 0, "ndjson, combined, mapped-json: lines per record (0: 100 for ndjson, 1 for the others)")
	w.inputOut = fs.String("input-out", "", "write the input file with which hotspotd (--input FILE) reads --form's records from --topic\nto `FILE` (- for stdout), and exit without producing")
	w.entries = fs.Int("batch-entries", 1000, "binary: (key, count) entries per record at most")
	w.flush = fs.Duration("flush", 100*time.Millisecond, "binary: interval summed into one batch, like the SDK's reporter")
	w.tick = fs.Duration("tick", 10*time.Millisecond, "pacing tick; must divide 100ms")
	w.seed = fs.Uint64("seed", 0, "random seed (0 picks one; it is recorded in the truth)")
	w.compression = fs.String("compression", "none", "Kafka compression: none, gzip, snappy, lz4 or zstd")
	w.early = fs.Uint64("early", 0, "binary: send a planted key at once when its count in the batch being filled reaches `N`,\nas an early send by the SDK's reporter would (0: off)")
	w.sources = fs.Int("sources", 0, "app instances the accesses come from, inst-0..inst-`N`-1 (combined, mapped-json: client\naddresses 10.x.y.z); 0: no source")
	w.sourceSkew = fs.Float64("source-skew", 0, "Zipf exponent `S` > 0 over the --sources instances (inst-0 the busiest); 0: uniform")
	w.hideSources = fs.Bool("hide-sources", false, "binary: keep each --sources instance's batches apart but write no source in them (the baseline of what sources cost)")
	w.batchTimeout = fs.Duration("batch-timeout", 5*time.Millisecond, "Kafka writer: how long a partition's batch waits for more records")
	w.kafka = kafkaio.AddSecurityFlags(fs)
	return w
}

// config checks the flags and returns the generator's Config.
func (w *workload) config() (loadgen.Config, error) {
	form, err := loadgen.ParseForm(*w.formName)
	if err != nil {
		return loadgen.Config{}, usageError{err}
	}
	cfg := loadgen.Config{
		Brokers: envflag.SplitList(*w.brokers), Topic: *w.topic, Compression: *w.compression,
		Rate: *w.rate, Keys: *w.keys, Skew: *w.skew, KeyPrefix: *w.prefix, Apps: *w.apps, App: *w.app,
		Duration: *w.duration, Tick: *w.tick, Flush: *w.flush, BatchTimeout: *w.batchTimeout, EarlyCount: *w.early,
		Sources: *w.sources, SourceSkew: *w.sourceSkew, HideSources: *w.hideSources,
		Form: form, Lines: *w.lines, BatchEntries: *w.entries,
		Threshold: *w.threshold, Seed: *w.seed,
		// Kafka write failures: the first is logged, all are counted.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if *w.rate == 0 {
		cfg.Rate = loadgen.NoBackground
	}
	getenv := w.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if cfg.Kafka, err = w.kafka.Resolve(getenv); err != nil {
		return cfg, usageError{err}
	}
	if len(cfg.Brokers) == 0 {
		return cfg, usagef("--brokers: at least one broker")
	}
	if *w.partitions < 1 {
		return cfg, usagef("--partitions must be >= 1")
	}
	if *w.replicas < 0 {
		return cfg, usagef("--replication-factor must be >= 0 (0: the brokers' default)")
	}
	for _, spec := range w.flashes {
		f, err := loadgen.ParseFlash(spec, *w.threshold)
		if err != nil {
			return cfg, usageError{err}
		}
		cfg.Flashes = append(cfg.Flashes, f)
	}
	if *w.planted != "" {
		var ms []float64
		for _, m := range envflag.SplitList(*w.planted) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(m, "x"), 64)
			if err != nil || !(v > 0) {
				return cfg, usagef("--planted: %q is not a positive multiple", m)
			}
			ms = append(ms, v)
		}
		cfg.Flashes = append(cfg.Flashes, loadgen.Planted(*w.plantedApp, *w.threshold, ms...)...)
	}
	if err := cfg.Check(); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

// ensureTopic creates the workload's topic if it is missing and returns its
// partition count, with an error that says what to do when no broker
// answers. A topic that exists keeps its partitions: when they are not
// --partitions, it warns on out.
func ensureTopic(ctx context.Context, out io.Writer, w *workload, cfg loadgen.Config) (int, error) {
	n, err := kafkaio.EnsureTopicSpec(ctx, cfg.Kafka, cfg.Brokers, cfg.Topic, kafkaio.TopicSpec{Partitions: *w.partitions, Replicas: *w.replicas})
	if errors.Is(err, kafkaio.ErrNoBroker) {
		return 0, fmt.Errorf("no broker answers at %s: start the stack with `make up` (%w)", *w.brokers, err)
	}
	if err == nil && n != *w.partitions {
		fmt.Fprintf(out, "warning: topic %s has %d partitions, not the %d of --partitions: it existed already (hotspotd creates it at start with its own --partitions), and the workload uses its %d\n",
			cfg.Topic, n, *w.partitions, n)
	}
	return n, err
}

func load(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := newFlags("load", loadHelp)
	w := addWorkloadFlags(fs, time.Minute)
	w.getenv = getenv
	truthPath := fs.String("truth", "", "write the ground truth to this JSON `FILE` at the end")
	quiet := fs.Bool("quiet", false, "no progress line every second")
	hotspotds := hotspotdFlag(fs, "HTTP addresses of hotspotd, comma-separated, asked which topic they consume\n(a warning when none consumes --topic); empty skips the check")
	fs.SetOutput(out)
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
	}
	cfg, err := w.config()
	if err != nil {
		return err
	}
	if *w.inputOut != "" {
		return writeInputFile(out, cfg, *w.inputOut)
	}
	if !*quiet {
		var prev loadgen.Stats
		cfg.Progress = func(s loadgen.Stats) {
			fmt.Fprint(out, s.Progress(prev))
			prev = s
		}
	}
	n, err := ensureTopic(ctx, out, w, cfg)
	if err != nil {
		return err
	}
	form := cfg.Form
	run := "until interrupted"
	if cfg.Duration > 0 {
		run = "for " + cfg.Duration.String()
	}
	from := ""
	if cfg.Sources > 0 {
		from = fmt.Sprintf(" from %d sources", cfg.Sources)
	}
	fmt.Fprintf(out, "hotspot load: %s records%s to %s (%d partitions) at %s, %s\n",
		form, from, cfg.Topic, n, strings.Join(cfg.Brokers, ","), run)
	if m := topicMismatch(ctx, envflag.SplitList(*hotspotds), cfg.Topic); m != "" {
		fmt.Fprintf(out, "warning: no detector will count this workload: %s\n", m)
	}
	if cfg.Form.NeedsInputFile() {
		with := ""
		if cfg.Sources > 0 {
			with = " (with --sources, to map the source)"
		}
		fmt.Fprintf(out, "note: hotspotd reads %s records only with their input file (hotspotd --input FILE); --input-out FILE writes it%s\n", cfg.Form, with)
	}

	st, runErr := loadgen.Run(ctx, cfg)
	if st.Truth == nil { // nothing ran
		return runErr
	}
	printSummary(out, st)
	if *truthPath != "" {
		if err := st.Truth.WriteFile(*truthPath); err != nil {
			return errors.Join(runErr, err)
		}
		fmt.Fprintf(out, "truth: %d keys x %d slots of %d ms from %s written to %s\n",
			len(st.Truth.Keys), st.Truth.Slots, st.Truth.SlotMs,
			st.Truth.Start().UTC().Format(time.RFC3339Nano), *truthPath)
	}
	return runErr
}

// writeInputFile writes the input file of cfg's form and topic (and
// sources) to path ("-" is out), for --input-out.
func writeInputFile(out io.Writer, cfg loadgen.Config, path string) error {
	b, err := cfg.InputFile()
	if err != nil {
		return usageError{err}
	}
	if path == "-" {
		_, err := out.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "input file for %s records on topic %s written to %s: start hotspotd with --input %s\n", cfg.Form, cfg.Topic, path, path)
	return nil
}

func printSummary(out io.Writer, s loadgen.Stats) {
	fmt.Fprintf(out, "done: %v (+%v to drain): %d events (%.0f/s), %d records (%.0f/s), %d entries (%.0f/s), %.1f MB (%.2f MB/s)\n",
		s.Elapsed, s.Drain.Round(time.Millisecond), s.Events, s.PerSecond(s.Events), s.Records, s.PerSecond(s.Records),
		s.Entries, s.PerSecond(s.Entries), float64(s.Bytes)/1e6, s.PerSecond(s.Bytes)/1e6)
	fmt.Fprintf(out, "      failed %d records (%d events); max lag behind schedule %v\n",
		s.FailedRecords, s.FailedEvents, s.MaxLag.Round(time.Millisecond))
	if s.MaxLag > time.Second {
		fmt.Fprintf(out, "warning: the generator fell %v behind its schedule: records left late and in bursts\n", s.MaxLag.Round(time.Millisecond))
	}
}
