package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// The demo's parts, one file each: demo_procs.go supervises the child
// processes, demo_driver.go drives reads through the apps, demo_monitor.go
// prints the live table and demo_report.go the summary. This file wires them.

const demoHelp = `
The main job in one command (make demo runs it after starting the stack and
building the binaries). It starts two hotspotd processes and two instances of
the example app (itemapp) against the local stack, then drives them:

  - Zipf background traffic: reads of 10,000 items spread over both apps,
    plus access events of other instances straight to Kafka;
  - partway through, a flash crowd on a few items, thousands of reads per
    second each, through the apps.

Every second it prints which keys are hot, the apps' L1 hit ratio and the
reads per second that reach Redis and the source; the live page is at
http://<first hotspotd>/. At the end (after --duration, or Ctrl-C) it prints a
summary, with the detection delay of each flash key and the share of the
flash keys' reads that the apps served from memory (served_l1, as the
cluster reported it), and stops everything it started.`

// demoFlash is one key of the flash crowd, driven through the apps.
type demoFlash struct {
	key   string
	start time.Duration
	ramp  time.Duration
	rate  float64 // reads/s once ramped up
}

func (f demoFlash) rateAt(d time.Duration) float64 {
	switch {
	case d < f.start:
		return 0
	case d >= f.start+f.ramp:
		return f.rate
	default:
		return f.rate * float64(d-f.start) / float64(f.ramp)
	}
}

func runDemo(ctx context.Context, args []string) error {
	return demo(ctx, args, os.Getenv, os.Stdout)
}

// demoOptions is what the flags of hotspot demo ask for.
type demoOptions struct {
	brokers, zk, redis    string
	duration, flashAt     time.Duration
	background, kafkaRate float64
	binDir                string
	basePort              int
}

// demoRun names what belongs to one run: every run gets its own root,
// topic, group and Redis prefix, so nothing left by an earlier run
// (offsets, hot sets, Redis values) colours this one.
type demoRun struct {
	root, topic, group, app, redisPrefix string
}

func newDemoRun(now time.Time) demoRun {
	run := now.UTC().Format("20060102-150405")
	return demoRun{root: "/hotspot-demo-" + run, topic: "hotspot.demo-" + run, group: "hotspot-demo-" + run,
		app: "shop", redisPrefix: "demo-" + run + ":"}
}

func demo(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	o, err := parseDemoFlags(args, getenv, out)
	if err != nil {
		return err
	}
	run := newDemoRun(time.Now())
	rdb, err := checkDemoStack(ctx, o, run)
	if err != nil {
		return err
	}
	defer rdb.Close()
	logDir, err := os.MkdirTemp("", "hotspot-demo-")
	if err != nil {
		return err
	}
	procs := &procSet{logDir: logDir}
	defer procs.stopAll(out)
	hotspotds, apps, err := startDemoCluster(ctx, procs, o, run)
	if err != nil {
		return err
	}

	// Follow the hot set as the apps do, for the report.
	sess, err := zkgroup.Connect(ctx, envflag.SplitList(o.zk), zkgroup.Config{})
	if err != nil {
		return err
	}
	defer sess.Close()
	var changes changeLog
	watcher, err := hotwatch.New(sess, hotwatch.Config{Root: run.root, App: run.app, OnChange: changes.record})
	if err != nil {
		return err
	}

	flashes := demoFlashes(o.flashAt)
	printDemoHeader(out, o, hotspotds, apps, logDir, flashes)
	start, drv, samples := driveDemo(ctx, o, run, hotspotds[0], apps, flashes, rdb, out, watcher, &changes)
	printDemoSummary(out, start, flashes, drv, changes.all(), samples)
	if ctx.Err() != nil {
		fmt.Fprintln(out, "interrupted")
	}
	return nil
}

func parseDemoFlags(args []string, getenv func(string) string, out io.Writer) (demoOptions, error) {
	fs := newFlags("demo", demoHelp)
	brokers := fs.String("brokers", "127.0.0.1:19092", "Kafka bootstrap brokers of the local stack")
	zkServers := fs.String("zk", "127.0.0.1:12181", "ZooKeeper of the local stack")
	redisAddr := fs.String("redis", "127.0.0.1:16379", "Redis of the local stack")
	duration := fs.Duration("duration", time.Minute, "how long to run")
	flashAt := fs.Duration("flash-at", 20*time.Second, "when the flash crowd starts")
	background := fs.Float64("background", 800, "background reads/s through the apps (Zipf over 10,000 items)")
	kafkaBackground := fs.Float64("kafka-background", 20000, "access events/s of other instances, straight to Kafka (Zipf s=0.8 over 1M items)")
	binDir := fs.String("bin", "", "folder of the hotspotd and itemapp binaries (default: beside this one)")
	basePort := fs.Int("port", 7070, "first HTTP port: hotspotd on PORT and PORT+1, the apps on PORT+10 and PORT+11")
	fs.SetOutput(out)
	if err := parseFlags(fs, args, getenv); err != nil {
		return demoOptions{}, err
	}
	o := demoOptions{brokers: *brokers, zk: *zkServers, redis: *redisAddr, duration: *duration, flashAt: *flashAt,
		background: *background, kafkaRate: *kafkaBackground, binDir: *binDir, basePort: *basePort}
	if o.binDir == "" {
		self, err := os.Executable()
		if err != nil {
			return o, err
		}
		o.binDir = filepath.Dir(self)
	}
	for _, b := range []string{"hotspotd", "itemapp"} {
		if _, err := os.Stat(filepath.Join(o.binDir, b)); err != nil {
			return o, fmt.Errorf("%s is not in %s: run `make build` (or pass --bin)", b, o.binDir)
		}
	}
	return o, nil
}

// checkDemoStack creates the run's topic and returns a client of the
// stack's Redis, with an error that says what to do when either is missing.
func checkDemoStack(ctx context.Context, o demoOptions, run demoRun) (*redis.Client, error) {
	if _, err := kafkaio.EnsureTopic(ctx, envflag.SplitList(o.brokers), run.topic, 8); err != nil {
		return nil, fmt.Errorf("no broker answers at %s (%w): start the stack with `make up`", o.brokers, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: o.redis})
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("no Redis answers at %s (%w): start the stack with `make up`", o.redis, err)
	}
	return rdb, nil
}

// startDemoCluster starts two hotspotd and two itemapp processes and waits
// until they answer; it returns their HTTP addresses.
func startDemoCluster(ctx context.Context, procs *procSet, o demoOptions, run demoRun) (hotspotds, apps []string, err error) {
	for i := range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", o.basePort+i)
		hotspotds = append(hotspotds, addr)
		if err := procs.start(ctx, filepath.Join(o.binDir, "hotspotd"), fmt.Sprintf("hotspotd-%d", i+1),
			"--brokers", o.brokers, "--zk", o.zk, "--zk-root", run.root, "--topic", run.topic, "--group", run.group,
			"--http-addr", addr, "--id", fmt.Sprintf("demo-%d", i+1)); err != nil {
			return nil, nil, err
		}
	}
	for i := range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", o.basePort+10+i)
		apps = append(apps, addr)
		if err := procs.start(ctx, filepath.Join(o.binDir, "itemapp"), fmt.Sprintf("itemapp-%d", i+1),
			"--app", run.app, "--brokers", o.brokers, "--topic", run.topic, "--zk", o.zk, "--zk-root", run.root,
			"--redis", o.redis, "--redis-prefix", run.redisPrefix, "--http-addr", addr); err != nil {
			return nil, nil, err
		}
	}
	for _, a := range hotspotds {
		if err := waitHTTP(ctx, "http://"+a+"/readyz", 60*time.Second); err != nil {
			return nil, nil, fmt.Errorf("hotspotd at %s is not ready (logs in %s): %w", a, procs.logDir, err)
		}
	}
	for _, a := range apps {
		if err := waitHTTP(ctx, "http://"+a+"/healthz", 30*time.Second); err != nil {
			return nil, nil, fmt.Errorf("itemapp at %s does not answer (logs in %s): %w", a, procs.logDir, err)
		}
	}
	return hotspotds, apps, nil
}

// demoFlashes is the flash crowd: three keys from flashAt on, 5 s apart.
func demoFlashes(flashAt time.Duration) []demoFlash {
	return []demoFlash{
		{key: "item:42", start: flashAt, ramp: 2 * time.Second, rate: 3000},
		{key: "item:7", start: flashAt + 5*time.Second, ramp: 0, rate: 1500},
		{key: "item:31337", start: flashAt + 10*time.Second, ramp: 5 * time.Second, rate: 1200},
	}
}

func printDemoHeader(out io.Writer, o demoOptions, hotspotds, apps []string, logDir string, flashes []demoFlash) {
	fmt.Fprintf(out, "\nHotspot demo: 2 hotspotd (%s), 2 apps (%s), stack %s / %s / %s\n",
		strings.Join(hotspotds, ", "), strings.Join(apps, ", "), o.brokers, o.zk, o.redis)
	fmt.Fprintf(out, "live page: http://%s/   (logs in %s)\n", hotspotds[0], logDir)
	fmt.Fprintf(out, "flash crowd from %v: ", o.flashAt)
	for i, f := range flashes {
		if i > 0 {
			fmt.Fprint(out, ", ")
		}
		fmt.Fprintf(out, "%s %.0f/s at +%v", f.key, f.rate, f.start)
	}
	fmt.Fprint(out, "\n\n")
}

// driveDemo runs the traffic (reads through the apps, access events of
// other instances straight to Kafka) and the live table for o.duration or
// until ctx ends; it returns when the run started, the driver and the
// table's samples (with what hotspotd says of the flash keys).
func driveDemo(ctx context.Context, o demoOptions, run demoRun, hotspotd string, apps []string, flashes []demoFlash,
	rdb *redis.Client, out io.Writer, watcher *hotwatch.Watcher, changes *changeLog) (time.Time, *driver, []sample) {
	runCtx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { watcher.Run(runCtx) })
	wg.Go(func() {
		_, _ = loadgen.Run(runCtx, loadgen.Config{Brokers: envflag.SplitList(o.brokers), Topic: run.topic, App: run.app,
			KeyPrefix: "item:", Rate: o.kafkaRate, Keys: 1_000_000, Skew: 0.8})
	})
	drv := newDriver(apps, flashes, o.background)
	start := time.Now()
	wg.Go(func() { drv.run(runCtx, start) })

	mon := &monitor{apps: apps, rdb: rdb, out: out, hotspotd: hotspotd, app: run.app}
	for _, f := range flashes {
		mon.flashKeys = append(mon.flashKeys, f.key)
	}
	samples := mon.loop(runCtx, start, changes.len, watcher)
	wg.Wait()
	return start, drv, samples
}

// changeLog keeps the hot-set changes seen during the run; it is safe for
// concurrent use.
type changeLog struct {
	mu      sync.Mutex // guards changes
	changes []hotwatch.Change
}

func (l *changeLog) record(c hotwatch.Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, c)
}

func (l *changeLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.changes)
}

func (l *changeLog) all() []hotwatch.Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]hotwatch.Change(nil), l.changes...)
}
