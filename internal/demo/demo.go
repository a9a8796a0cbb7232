package demo

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

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// The demo's parts, one file each: procs.go supervises the child
// processes, driver.go drives reads through the apps, monitor.go prints the
// live table and report.go the summary. This file wires them.

// Config is one demo run against the local stack.
type Config struct {
	Brokers    string        // Kafka bootstrap brokers, comma-separated
	ZooKeeper  string        // servers, comma-separated
	Redis      string        // address
	Duration   time.Duration // how long the traffic runs
	FlashAt    time.Duration // when the flash crowd starts
	Background float64       // background reads/s through the apps
	KafkaRate  float64       // access events/s of other instances, straight to Kafka
	BinDir     string        // folder of the hotspotd and itemapp binaries
	BasePort   int           // hotspotd on BasePort and BasePort+1, the apps on BasePort+10 and +11
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

// Run starts two hotspotd and two itemapp processes on the local stack,
// drives traffic through them with a flash crowd for cfg.Duration (or until
// ctx ends), prints a live table and a summary to out, and stops every
// process it started.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	o := cfg
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
	sess, err := zkgroup.Connect(ctx, envflag.SplitList(o.ZooKeeper), zkgroup.Config{})
	if err != nil {
		return err
	}
	defer sess.Close()
	var changes changeLog
	watcher, err := hotwatch.New(sess, hotwatch.Config{Root: run.root, App: run.app, OnChange: changes.record})
	if err != nil {
		return err
	}

	flashes := demoFlashes(o.FlashAt)
	printDemoHeader(out, o, hotspotds, apps, logDir, flashes)
	start, drv, samples := driveDemo(ctx, o, run, hotspotds[0], apps, flashes, rdb, out, watcher, &changes)
	printDemoSummary(out, start, flashes, drv, changes.all(), samples)
	if ctx.Err() != nil {
		fmt.Fprintln(out, "interrupted")
	}
	return nil
}

// checkDemoStack creates the run's topic and returns a client of the
// stack's Redis, with an error that says what to do when either is missing.
func checkDemoStack(ctx context.Context, o Config, run demoRun) (*redis.Client, error) {
	if _, err := kafkaio.EnsureTopic(ctx, envflag.SplitList(o.Brokers), run.topic, 8); err != nil {
		return nil, fmt.Errorf("no broker answers at %s (%w): start the stack with `make up`", o.Brokers, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: o.Redis})
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("no Redis answers at %s (%w): start the stack with `make up`", o.Redis, err)
	}
	return rdb, nil
}

// startDemoCluster starts two hotspotd and two itemapp processes and waits
// until they answer; it returns their HTTP addresses.
func startDemoCluster(ctx context.Context, procs *procSet, o Config, run demoRun) (hotspotds, apps []string, err error) {
	for i := range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", o.BasePort+i)
		hotspotds = append(hotspotds, addr)
		if err := procs.start(ctx, filepath.Join(o.BinDir, "hotspotd"), fmt.Sprintf("hotspotd-%d", i+1),
			"--brokers", o.Brokers, "--zk", o.ZooKeeper, "--zk-root", run.root, "--topic", run.topic, "--group", run.group,
			"--http-addr", addr, "--id", fmt.Sprintf("demo-%d", i+1)); err != nil {
			return nil, nil, err
		}
	}
	for i := range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", o.BasePort+10+i)
		apps = append(apps, addr)
		if err := procs.start(ctx, filepath.Join(o.BinDir, "itemapp"), fmt.Sprintf("itemapp-%d", i+1),
			"--app", run.app, "--brokers", o.Brokers, "--topic", run.topic, "--zk", o.ZooKeeper, "--zk-root", run.root,
			"--redis", o.Redis, "--redis-prefix", run.redisPrefix, "--http-addr", addr); err != nil {
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
func demoFlashes(flashAt time.Duration) []loadgen.Flash {
	return []loadgen.Flash{
		{Key: "item:42", Start: flashAt, Ramp: 2 * time.Second, Rate: 3000},
		{Key: "item:7", Start: flashAt + 5*time.Second, Ramp: 0, Rate: 1500},
		{Key: "item:31337", Start: flashAt + 10*time.Second, Ramp: 5 * time.Second, Rate: 1200},
	}
}

func printDemoHeader(out io.Writer, o Config, hotspotds, apps []string, logDir string, flashes []loadgen.Flash) {
	fmt.Fprintf(out, "\nHotspot demo: 2 hotspotd (%s), 2 apps (%s), stack %s / %s / %s\n",
		strings.Join(hotspotds, ", "), strings.Join(apps, ", "), o.Brokers, o.ZooKeeper, o.Redis)
	fmt.Fprintf(out, "live page: http://%s/   (logs in %s)\n", hotspotds[0], logDir)
	fmt.Fprintf(out, "flash crowd from %v: ", o.FlashAt)
	for i, f := range flashes {
		if i > 0 {
			fmt.Fprint(out, ", ")
		}
		fmt.Fprintf(out, "%s %.0f/s at +%v", f.Key, f.Rate, f.Start)
	}
	fmt.Fprint(out, "\n\n")
}

// driveDemo runs the traffic (reads through the apps, access events of
// other instances straight to Kafka) and the live table for o.Duration or
// until ctx ends; it returns when the run started, the driver and the
// table's samples (with what hotspotd says of the flash keys).
func driveDemo(ctx context.Context, o Config, run demoRun, hotspotd string, apps []string, flashes []loadgen.Flash,
	rdb *redis.Client, out io.Writer, watcher *hotwatch.Watcher, changes *changeLog) (time.Time, *driver, []sample) {
	runCtx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { watcher.Run(runCtx) })
	wg.Go(func() {
		_, _ = loadgen.Run(runCtx, loadgen.Config{Brokers: envflag.SplitList(o.Brokers), Topic: run.topic, App: run.app,
			KeyPrefix: "item:", Rate: o.KafkaRate, Keys: 1_000_000, Skew: 0.8})
	})
	drv := newDriver(apps, flashes, o.Background)
	start := time.Now()
	wg.Go(func() { drv.run(runCtx, start) })

	mon := &monitor{apps: apps, rdb: rdb, out: out, app: run.app}
	if c, err := hotspotapi.NewClient(hotspotd, hotspotapi.ClientConfig{}); err == nil {
		mon.hotspotd = c
	}
	for _, f := range flashes {
		mon.flashKeys = append(mon.flashKeys, f.Key)
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
