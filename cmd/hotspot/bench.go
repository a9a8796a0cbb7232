package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hotspot-dev/hotspot/hotcache"
	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/bench"
	"github.com/hotspot-dev/hotspot/internal/envflag"
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
	return benchCmd(ctx, args, os.Getenv, os.Stdout)
}

// benchOptions is what the flags of hotspot bench ask for.
type benchOptions struct {
	w         *workload
	hotspotds []string // HTTP addresses
	cfg       bench.Config
}

func benchCmd(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	o, err := parseBenchFlags(args, getenv, out)
	if err != nil {
		return err
	}
	if *o.w.inputOut != "" {
		return writeInputFile(out, o.cfg.Workload, *o.w.inputOut)
	}
	if _, err := bench.Scrape(ctx, o.cfg.Hotspotds); err != nil {
		return fmt.Errorf("%w: is hotspotd running? (--hotspotd)", err)
	}
	if m := topicMismatch(ctx, o.hotspotds, o.cfg.Workload.Topic); m != "" {
		return fmt.Errorf("the workload would never reach a detector: %s", m)
	}
	if o.cfg.Partitions, err = ensureTopic(ctx, out, o.w, o.cfg.Workload); err != nil {
		return err
	}
	app, err := embeddedApp(ctx, o.cfg)
	if err != nil {
		return err
	}
	defer app.Close()
	o.cfg.L1Keys = func() []string {
		var keys []string
		for _, k := range app.Hot() {
			if k.Loaded {
				keys = append(keys, k.Key)
			}
		}
		return keys
	}
	_, err = bench.Run(ctx, o.cfg, out)
	return err
}

// embeddedApp is an app of the workload's app, as an SDK user would embed
// it: it watches the hot set and loads each promoted key into its L1, from
// a constant loader (the load itself is not what bench measures).
func embeddedApp(ctx context.Context, cfg bench.Config) (*hotcache.Client, error) {
	app, err := hotcache.New(ctx, hotcache.WithApp(cfg.Workload.App), hotcache.WithZooKeeper(cfg.ZooKeeper, cfg.Root),
		hotcache.WithZooKeeperAuth(cfg.ZKAuth.User, cfg.ZKAuth.Password),
		hotcache.WithLoader(hotcache.LoaderFunc(func(context.Context, string) ([]byte, error) { return []byte("v"), nil })))
	if err != nil {
		return nil, fmt.Errorf("hotcache client: %w", err)
	}
	return app, nil
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
	o := benchOptions{w: w, hotspotds: envflag.SplitList(*addrs), cfg: bench.Config{Workload: cfg,
		ZooKeeper: envflag.SplitList(*zkServers), Root: *root, Settle: *settle, JSONPath: *jsonPath,
		AllowMissed: *allowMissed, RuleApps: *ruleApps}}
	if *rulesPath != "" {
		if cfg.Apps != 1 {
			return o, usagef("--rules needs a single app (--apps 1)")
		}
		b, err := os.ReadFile(*rulesPath)
		if err != nil {
			return o, usageError{err}
		}
		if o.cfg.Rules, err = rules.Decode(b); err != nil {
			return o, usagef("--rules %s: %v", *rulesPath, err)
		}
		if o.cfg.RuleApps < 1 {
			return o, usagef("--rules-apps must be >= 1")
		}
	}
	if len(o.cfg.ZooKeeper) == 0 || len(o.hotspotds) == 0 {
		return o, usagef("--zk and --hotspotd need at least one address each")
	}
	if o.cfg.Hotspotds, err = apiClients(o.hotspotds); err != nil {
		return o, err
	}
	if o.cfg.ZKAuth, err = zkgroup.DigestFromEnv(getenv, "HOTSPOT_ZK_DIGEST"); err != nil {
		return o, usageError{err}
	}
	if *brokerPid < 0 || *zkPid < 0 {
		return o, usagef("--broker-pid and --zk-pid must be >= 0")
	}
	if o.cfg.Procs, err = bench.FindProcs(*stackDir, *brokerPid, *zkPid); err != nil {
		return o, err
	}
	return o, nil
}
