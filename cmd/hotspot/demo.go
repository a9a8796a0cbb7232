package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/envflag"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/score"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

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
summary, with the detection delay of each flash key, and stops everything it
started.`

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

func demo(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
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
		return err
	}
	if *binDir == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		*binDir = filepath.Dir(self)
	}
	for _, b := range []string{"hotspotd", "itemapp"} {
		if _, err := os.Stat(filepath.Join(*binDir, b)); err != nil {
			return fmt.Errorf("%s is not in %s: run `make build` (or pass --bin)", b, *binDir)
		}
	}

	// Every run gets its own root, topic and group, so nothing left by an
	// earlier run (offsets, hot sets, Redis values) colours this one.
	run := time.Now().UTC().Format("20060102-150405")
	root, topic, group, app := "/hotspot-demo-"+run, "hotspot.demo-"+run, "hotspot-demo-"+run, "shop"
	bk, zks := envflag.SplitList(*brokers), envflag.SplitList(*zkServers)
	if _, err := kafkaio.EnsureTopic(ctx, bk, topic, 8); err != nil {
		return fmt.Errorf("no broker answers at %s (%w): start the stack with `make up`", *brokers, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("no Redis answers at %s (%w): start the stack with `make up`", *redisAddr, err)
	}

	logDir, err := os.MkdirTemp("", "hotspot-demo-")
	if err != nil {
		return err
	}
	procs := &procSet{logDir: logDir}
	defer procs.stopAll(out)
	var hotspotds, apps []string
	for i := range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", *basePort+i)
		hotspotds = append(hotspotds, addr)
		if err := procs.start(ctx, filepath.Join(*binDir, "hotspotd"), fmt.Sprintf("hotspotd-%d", i+1),
			"--brokers", *brokers, "--zk", *zkServers, "--zk-root", root, "--topic", topic, "--group", group,
			"--http-addr", addr, "--id", fmt.Sprintf("demo-%d", i+1)); err != nil {
			return err
		}
	}
	for i := range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", *basePort+10+i)
		apps = append(apps, addr)
		if err := procs.start(ctx, filepath.Join(*binDir, "itemapp"), fmt.Sprintf("itemapp-%d", i+1),
			"--app", app, "--brokers", *brokers, "--topic", topic, "--zk", *zkServers, "--zk-root", root,
			"--redis", *redisAddr, "--redis-prefix", "demo-"+run+":", "--http-addr", addr); err != nil {
			return err
		}
	}
	for _, a := range hotspotds {
		if err := waitHTTP(ctx, "http://"+a+"/readyz", 60*time.Second); err != nil {
			return fmt.Errorf("hotspotd at %s is not ready (logs in %s): %w", a, logDir, err)
		}
	}
	for _, a := range apps {
		if err := waitHTTP(ctx, "http://"+a+"/healthz", 30*time.Second); err != nil {
			return fmt.Errorf("itemapp at %s does not answer (logs in %s): %w", a, logDir, err)
		}
	}

	// Follow the hot set as the apps do, for the report.
	sess, err := zkgroup.Connect(ctx, zks, zkgroup.Config{})
	if err != nil {
		return err
	}
	defer sess.Close()
	var evMu sync.Mutex
	var events []hotwatch.Change
	watcher, err := hotwatch.New(sess, hotwatch.Config{Root: root, App: app, OnChange: func(c hotwatch.Change) {
		evMu.Lock()
		events = append(events, c)
		evMu.Unlock()
	}})
	if err != nil {
		return err
	}

	flashes := []demoFlash{
		{key: "item:42", start: *flashAt, ramp: 2 * time.Second, rate: 3000},
		{key: "item:7", start: *flashAt + 5*time.Second, ramp: 0, rate: 1500},
		{key: "item:31337", start: *flashAt + 10*time.Second, ramp: 5 * time.Second, rate: 1200},
	}
	fmt.Fprintf(out, "\nHotspot demo: 2 hotspotd (%s), 2 apps (%s), stack %s / %s / %s\n",
		strings.Join(hotspotds, ", "), strings.Join(apps, ", "), *brokers, *zkServers, *redisAddr)
	fmt.Fprintf(out, "live page: http://%s/   (logs in %s)\n", hotspotds[0], logDir)
	fmt.Fprintf(out, "flash crowd from %v: ", *flashAt)
	for i, f := range flashes {
		if i > 0 {
			fmt.Fprint(out, ", ")
		}
		fmt.Fprintf(out, "%s %.0f/s at +%v", f.key, f.rate, f.start)
	}
	fmt.Fprint(out, "\n\n")

	runCtx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { watcher.Run(runCtx) })
	wg.Go(func() {
		_, _ = loadgen.Run(runCtx, loadgen.Config{Brokers: bk, Topic: topic, App: app, KeyPrefix: "item:",
			Rate: *kafkaBackground, Keys: 1_000_000, Skew: 0.8})
	})
	drv := newDriver(apps, flashes, *background)
	start := time.Now()
	wg.Go(func() { drv.run(runCtx, start) })

	mon := &monitor{apps: apps, rdb: rdb, out: out}
	samples := mon.loop(runCtx, start, func() int {
		evMu.Lock()
		defer evMu.Unlock()
		return len(events)
	}, watcher)
	wg.Wait()

	evMu.Lock()
	defer evMu.Unlock()
	printDemoSummary(out, start, flashes, drv, events, samples)
	if ctx.Err() != nil {
		fmt.Fprintln(out, "interrupted")
	}
	return nil
}

// procSet starts child processes and stops them all with SIGTERM.
type procSet struct {
	logDir string
	procs  []*exec.Cmd
	names  []string
	done   []chan error
}

func (p *procSet) start(ctx context.Context, bin, name string, args ...string) error {
	logf, err := os.Create(filepath.Join(p.logDir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	p.procs, p.names, p.done = append(p.procs, cmd), append(p.names, name), append(p.done, done)
	return nil
}

// stopAll stops the processes in reverse order of start, apps first.
func (p *procSet) stopAll(out io.Writer) {
	for i := len(p.procs) - 1; i >= 0; i-- {
		cmd := p.procs[i]
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.done[i]:
			if err != nil {
				fmt.Fprintf(out, "%s exited: %v (log: %s)\n", p.names[i], err, filepath.Join(p.logDir, p.names[i]+".log"))
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			fmt.Fprintf(out, "%s did not stop within 30s of SIGTERM; killed\n", p.names[i])
		}
	}
	fmt.Fprintf(out, "stopped %d processes\n", len(p.procs))
}

func waitHTTP(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return last
}

// driver reads items through the apps: Zipf background plus the flash crowd.
type driver struct {
	apps       []string
	flashes    []demoFlash
	background float64
	client     *http.Client
	reqs       chan string
	sent       atomic.Int64
	throttled  atomic.Int64 // 503: a rate limit of the app refused the read
	failed     atomic.Int64 // transport errors and other statuses
	dropped    atomic.Int64 // not sent: the apps were saturated
	mu         sync.Mutex
	flashSent  map[string][]time.Time // flash key -> send time of each read
}

func newDriver(apps []string, flashes []demoFlash, background float64) *driver {
	return &driver{
		apps: apps, flashes: flashes, background: background,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			MaxIdleConns: 256, MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second}},
		reqs:      make(chan string, 4096),
		flashSent: make(map[string][]time.Time),
	}
}

func (d *driver) run(ctx context.Context, start time.Time) {
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for u := range d.reqs {
				resp, err := d.client.Get(u)
				if err != nil {
					d.failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
				case http.StatusServiceUnavailable:
					d.throttled.Add(1)
				default:
					d.failed.Add(1)
				}
			}
		})
	}
	defer wg.Wait()
	defer close(d.reqs)

	rng := rand.New(rand.NewPCG(42, 7))
	zipf := rand.NewZipf(rng, 1.1, 1, 9_999)
	owed := make([]float64, len(d.flashes)+1)
	next := 0
	send := func(id string) bool {
		u := "http://" + d.apps[next%len(d.apps)] + "/item/" + id
		next++
		select {
		case d.reqs <- u:
			d.sent.Add(1)
			return true
		default: // the apps are saturated: drop rather than queue without bound
			d.dropped.Add(1)
			return false
		}
	}
	tk := time.NewTicker(10 * time.Millisecond)
	defer tk.Stop()
	last := start
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		owed[0] += d.background * dt
		for ; owed[0] >= 1; owed[0]-- {
			send(strconv.FormatUint(zipf.Uint64()+1000, 10)) // items 1000..10999
		}
		for i, f := range d.flashes {
			owed[i+1] += f.rateAt(now.Sub(start)) * dt
			id := strings.TrimPrefix(f.key, "item:")
			for ; owed[i+1] >= 1; owed[i+1]-- {
				if send(id) {
					d.mu.Lock()
					d.flashSent[f.key] = append(d.flashSent[f.key], time.Now())
					d.mu.Unlock()
				}
			}
		}
	}
}

// crossing is when key's trailing one-second read count first reached n.
func (d *driver) crossing(key string, n int) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return score.FirstCrossing(d.flashSent[key], n, time.Second)
}

// sample is one second of the apps' and Redis's counters.
type sample struct {
	at                          time.Duration
	gets, l1Hits, source, redis float64 // per second
	hot                         []string
}

type monitor struct {
	apps []string
	rdb  *redis.Client
	out  io.Writer
}

type counters struct{ hits, misses, source, redis float64 }

func (m *monitor) read(ctx context.Context) counters {
	var c counters
	for _, a := range m.apps {
		if ms, err := metricsOf(ctx, a); err == nil {
			c.hits += ms["hotspot_hotcache_l1_hits_total"]
			c.misses += ms["hotspot_hotcache_l1_misses_total"]
			c.source += ms["itemapp_source_reads_total"]
		}
	}
	if info, err := m.rdb.Info(ctx, "stats").Result(); err == nil {
		c.redis = redisStat(info, "keyspace_hits") + redisStat(info, "keyspace_misses")
	}
	return c
}

func redisStat(info, name string) float64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// loop prints one line a second until ctx ends and returns the samples.
func (m *monitor) loop(ctx context.Context, start time.Time, nEvents func() int, w *hotwatch.Watcher) []sample {
	tw := tabwriter.NewWriter(m.out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "time\tapp gets/s\tL1 hit\tRedis reads/s\tsource reads/s\thot keys\t")
	tw.Flush()
	prev := m.read(ctx)
	var out []sample
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tk.C:
		}
		cur := m.read(ctx)
		s := sample{at: time.Since(start).Round(time.Second),
			gets:   (cur.hits + cur.misses) - (prev.hits + prev.misses),
			l1Hits: cur.hits - prev.hits, source: cur.source - prev.source, redis: cur.redis - prev.redis}
		prev = cur
		for _, k := range w.Snapshot().App("shop") {
			s.hot = append(s.hot, fmt.Sprintf("%s (%.0f/s)", k.Key, k.Rate))
		}
		out = append(out, s)
		ratio := 0.0
		if s.gets > 0 {
			ratio = s.l1Hits / s.gets
		}
		fmt.Fprintf(tw, "%v\t%.0f\t%.1f%%\t%.0f\t%.0f\t%s\t\n", s.at, s.gets, 100*ratio, s.redis, s.source, strings.Join(s.hot, " "))
		tw.Flush()
	}
}

func printDemoSummary(out io.Writer, start time.Time, flashes []demoFlash, d *driver, events []hotwatch.Change, samples []sample) {
	fmt.Fprintf(out, "\n== demo summary ==\n")
	fmt.Fprintf(out, "reads sent through the apps: %d; refused by the apps' rate limits (503): %d; failed: %d; not sent (apps saturated): %d\n",
		d.sent.Load(), d.throttled.Load(), d.failed.Load(), d.dropped.Load())
	fmt.Fprintln(out, "hot-set changes seen in ZooKeeper:")
	for _, c := range events {
		for _, k := range c.Added {
			fmt.Fprintf(out, "  +%6.1fs  %s turned hot (%.0f/s)\n", c.At.Sub(start).Seconds(), k.Key, k.Rate)
		}
		for _, k := range c.Removed {
			fmt.Fprintf(out, "  +%6.1fs  %s went cold\n", c.At.Sub(start).Seconds(), k)
		}
	}
	fmt.Fprintln(out, "detection delay of the flash keys (their reads crossing 1000/s -> published in ZooKeeper):")
	for _, f := range flashes {
		crossed, ok := d.crossing(f.key, 1000)
		if !ok {
			fmt.Fprintf(out, "  %-12s never reached 1000 reads/s (the run ended first?)\n", f.key)
			continue
		}
		found := false
		for _, c := range events {
			for _, k := range c.Added {
				if k.Key == f.key && !found {
					fmt.Fprintf(out, "  %-12s %v\n", f.key, c.At.Sub(crossed).Round(time.Millisecond))
					found = true
				}
			}
		}
		if !found {
			fmt.Fprintf(out, "  %-12s not published\n", f.key)
		}
	}
	// Before and after: the seconds just before the first flash key turned
	// hot, and the last seconds of the run.
	var before, after []sample
	first := flashes[0].start
	for _, s := range samples {
		if s.at > first-6*time.Second && s.at <= first {
			before = append(before, s)
		}
	}
	if n := len(samples); n >= 5 {
		after = samples[n-5:]
	}
	avg := func(ss []sample) sample {
		var a sample
		for _, s := range ss {
			a.gets += s.gets
			a.l1Hits += s.l1Hits
			a.redis += s.redis
			a.source += s.source
		}
		if n := float64(len(ss)); n > 0 {
			a.gets, a.l1Hits, a.redis, a.source = a.gets/n, a.l1Hits/n, a.redis/n, a.source/n
		}
		return a
	}
	b, a := avg(before), avg(after)
	ratio := func(s sample) float64 {
		if s.gets == 0 {
			return 0
		}
		return 100 * s.l1Hits / s.gets
	}
	fmt.Fprintf(out, "before the flash crowd: %6.0f gets/s, L1 hit %5.1f%%, %6.0f Redis reads/s, %5.0f source reads/s\n",
		b.gets, ratio(b), b.redis, b.source)
	fmt.Fprintf(out, "last 5 s (promoted):    %6.0f gets/s, L1 hit %5.1f%%, %6.0f Redis reads/s, %5.0f source reads/s\n",
		a.gets, ratio(a), a.redis, a.source)
}
