package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/score"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// cluster is a set of hotspotd processes sharing one topic, group and root.
type cluster struct {
	t                       *testing.T
	bin                     string
	brokers, zk             string
	topic, group, root, dir string
	extra                   []string          // more flags for every process
	zkOf                    map[string]string // a process's own --zk, by id (default zk)
}

func newCluster(t *testing.T, partitions int) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test; -short skips it")
	}
	c := buildCluster(t, stacktest.Kafka(t), stacktest.ZK(t), stacktest.Name(t), partitions)
	c.cleanHistory(t) // every hotspotd keeps a history in the shared Redis (--redis)
	return c
}

// buildCluster builds hotspotd for a cluster on the given stack (Kafka
// brokers and ZooKeeper servers, comma-separated), whose topic, group and
// ZooKeeper root are named name, and creates its topic.
func buildCluster(t *testing.T, brokers, zk, name string, partitions int) *cluster {
	t.Helper()
	c := &cluster{t: t, brokers: brokers, zk: zk, dir: t.TempDir()}
	c.topic, c.group, c.root = name, name, "/"+name
	c.bin = filepath.Join(c.dir, "hotspotd")
	if out, err := exec.Command("go", "build", "-o", c.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if _, err := kafkaio.EnsureTopic(context.Background(), strings.Split(brokers, ","), c.topic, partitions); err != nil {
		t.Fatal(err)
	}
	return c
}

type proc struct {
	cmd  *exec.Cmd
	addr string
	id   string
	done chan error
}

// start runs one hotspotd; the test's cleanup stops it with SIGTERM.
func (c *cluster) start(id string) *proc {
	c.t.Helper()
	addr := freeAddr(c.t)
	logf, err := os.Create(filepath.Join(c.dir, id+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	zk := c.zk
	if z := c.zkOf[id]; z != "" {
		zk = z
	}
	cmd := exec.Command(c.bin, "--brokers", c.brokers, "--zk", zk, "--topic", c.topic,
		"--group", c.group, "--zk-root", c.root, "--http-addr", addr, "--id", id, "--from-oldest=true",
		"--admin-token", "e2e-secret")
	cmd.Args = append(cmd.Args, c.extra...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = diesWithTest
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p := &proc{cmd: cmd, addr: addr, id: id, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); logf.Close() }()
	c.t.Cleanup(func() {
		p.stop(c.t)
		if c.t.Failed() || os.Getenv("HOTSPOT_E2E_LOGS") == "always" {
			// The whole log with HOTSPOT_E2E_LOGS, its end otherwise: a
			// failure in CI leaves no temp dir to read it from.
			// HOTSPOT_E2E_LOGS=always prints it whole for a test that
			// passed too.
			b, _ := os.ReadFile(logf.Name())
			if os.Getenv("HOTSPOT_E2E_LOGS") == "" {
				b = lastLines(b, 80)
			}
			c.t.Logf("log of %s:\n%s", id, b)
		}
	})
	waitFor(c.t, 30*time.Second, id+" ready", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// stop sends SIGTERM and requires a clean exit (status 0) within 20 s.
func (p *proc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil || p.cmd.Process == nil {
		return
	}
	select {
	case err := <-p.done:
		p.done <- err
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("%s did not exit cleanly on SIGTERM: %v", p.id, err)
		}
		p.done <- err
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		t.Errorf("%s did not exit within 20s of SIGTERM", p.id)
	}
}

func (p *proc) kill() {
	p.cmd.Process.Kill()
	p.done <- <-p.done
}

// producer sends access events at fixed rates per key, as JSON records or
// as SDK binary batches, and keeps the send log of the keys it watches.
type producer struct {
	w      *kafka.Writer
	binary bool // one SDK batch per tick instead of a JSON record per event
	mu     sync.Mutex
	sends  map[string][]time.Time // watched key -> when each of its events was acknowledged
}

func newProducer(t *testing.T, brokers, topic string, binary bool) *producer {
	// As the SDK writes (hotcache/kafka.go): acks=all over a Transport of
	// its own that learns a new leader within 2 s. kafka-go's shared
	// default Transport, which the test's other clients used before a
	// broker restart, kept sending to the old connections for up to 6 s.
	w := &kafka.Writer{Addr: kafka.TCP(strings.Split(brokers, ",")...), Topic: topic, Balancer: &kafka.RoundRobin{},
		BatchTimeout: 2 * time.Millisecond, BatchSize: 2000, RequiredAcks: kafka.RequireAll,
		Transport: (*kafkaio.Security)(nil).WriterTransport(topic)}
	t.Cleanup(func() { w.Close() })
	return &producer{w: w, binary: binary, sends: make(map[string][]time.Time)}
}

// run sends, until ctx ends, rates[key] events/s of each key (app "shop"),
// plus background events/s spread uniformly over 20,000 cold keys. What is
// owed follows the clock, not the ticks, so a slow machine gets bursts
// rather than a lower rate.
func (p *producer) run(ctx context.Context, t *testing.T, rates map[string]float64, background float64) {
	const tick = 10 * time.Millisecond
	owed := make(map[string]float64)
	rng := rand.New(rand.NewPCG(1, 2))
	var buf []byte
	var failing writeRetry
	tk := time.NewTicker(tick)
	defer tk.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		var msgs []kafka.Message
		var batch []wire.KeyCount
		add := func(key string, n uint64) {
			if p.binary {
				batch = append(batch, wire.KeyCount{Key: key, Count: n})
				return
			}
			for range n {
				buf = wire.AppendJSON(buf[:0], wire.Event{App: "shop", Key: key})
				msgs = append(msgs, kafka.Message{Value: append([]byte(nil), buf...)})
			}
		}
		sent := make(map[string]int)
		for key, rate := range rates {
			owed[key] += rate * dt
			if n := int(owed[key]); n > 0 {
				owed[key] -= float64(n)
				add(key, uint64(n))
				sent[key] = n
			}
		}
		owed[""] += background * dt
		for ; owed[""] >= 1; owed[""]-- {
			add("cold:"+strconv.Itoa(rng.IntN(20000)), 1)
		}
		if len(batch) > 0 {
			msgs = append(msgs, kafka.Message{Value: wire.AppendBatch(nil, "shop", now.UnixMilli(), batch)})
		}
		if ok, stop := failing.write(ctx, t, p.w, msgs); stop {
			return
		} else if !ok {
			continue
		}
		acked := time.Now()
		p.mu.Lock()
		for key, n := range sent {
			for range n {
				p.sends[key] = append(p.sends[key], acked)
			}
		}
		p.mu.Unlock()
	}
}

// crossing is when key's trailing one-second send count first reached n.
func (p *producer) crossing(key string, n int) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return score.FirstCrossing(p.sends[key], n, time.Second)
}

// TestFlashCrowd: a key that jumps from 0 to 3000/s amid background traffic
// is published in ZooKeeper and listed by /v1/hotkeys, within the delay
// bound; the background keys never are.
func TestFlashCrowd(t *testing.T) {
	c := newCluster(t, 8)
	p1 := c.start("a1")
	w := c.watch(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prod := newProducer(t, c.brokers, c.topic, false)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { prod.run(ctx, t, nil, 2000) })
	time.Sleep(2 * time.Second) // background only
	if n := len(w.Snapshot().App("shop")); n != 0 {
		t.Fatalf("background traffic made %d keys hot, want 0", n)
	}
	cancel()
	wg.Wait()

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	wg.Go(func() { prod.run(ctx, t, map[string]float64{"item:flash": 3000}, 2000) })
	var seen time.Time
	waitFor(t, 15*time.Second, "item:flash in ZooKeeper", func() bool {
		_, ok := w.Snapshot().Key("shop", "item:flash")
		seen = time.Now()
		return ok
	})
	crossed, ok := prod.crossing("item:flash", 1000)
	if !ok {
		t.Fatal("the flash key never reached 1000/s in the send log")
	}
	delay := seen.Sub(crossed)
	t.Logf("detection delay, true crossing to ZooKeeper watch: %v", delay)
	if delay > 1500*time.Millisecond {
		t.Errorf("detection delay %v, want <= 1.5s", delay)
	}

	var got struct {
		App     string `json:"app"`
		HotKeys []struct {
			Key    string  `json:"key"`
			Rate   float64 `json:"rate"`
			Since  string  `json:"since"`
			Source string  `json:"source"`
		} `json:"hotkeys"`
	}
	// The API serves a1's own watch of ZooKeeper, which may hear of the
	// write a moment after the test's watcher did.
	waitFor(t, 2*time.Second, "item:flash in a1's /v1/hotkeys", func() bool {
		getJSON(t, "http://"+p1.addr+"/v1/hotkeys?app=shop", &got)
		return len(got.HotKeys) > 0
	})
	if len(got.HotKeys) != 1 || got.HotKeys[0].Key != "item:flash" || got.HotKeys[0].Source != "detected" {
		t.Fatalf("/v1/hotkeys = %+v, want item:flash alone", got)
	}
	// The published rate is the one at publication (renewed every few
	// seconds), so it lies between the threshold and the key's full rate.
	if r := got.HotKeys[0].Rate; r < 1000 || r > 3600 {
		t.Errorf("published rate %.0f, want 1000 to 3600", r)
	}
	if _, err := time.Parse(time.RFC3339Nano, got.HotKeys[0].Since); err != nil {
		t.Errorf("since %q is not RFC 3339: %v", got.HotKeys[0].Since, err)
	}

	// Operators: block the flash key, pin a quiet one.
	admin(t, "PUT", "http://"+p1.addr+"/v1/blocks/item:flash?app=shop")
	admin(t, "PUT", "http://"+p1.addr+"/v1/pins/item:quiet?app=shop")
	waitFor(t, 10*time.Second, "the block and the pin in ZooKeeper", func() bool {
		_, flash := w.Snapshot().Key("shop", "item:flash")
		quiet, pinned := w.Snapshot().Key("shop", "item:quiet")
		return !flash && pinned && quiet.Source == "pinned"
	})
	// hotspotd follows ZooKeeper through its own session: it may see the
	// change a moment after this test's watcher did.
	waitFor(t, 10*time.Second, "/v1/hotkeys to list item:quiet (pinned) alone", func() bool {
		got.HotKeys = nil
		getJSON(t, "http://"+p1.addr+"/v1/hotkeys?app=shop", &got)
		return len(got.HotKeys) == 1 && got.HotKeys[0].Key == "item:quiet" && got.HotKeys[0].Source == "pinned"
	})
}

// admin sends an authorized admin call and requires 204.
func admin(t *testing.T, method, url string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer e2e-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("%s %s: %s, want 204", method, url, resp.Status)
	}
}

// TestKillAndRestart: three processes; SIGKILL one and its hot keys move to
// the survivors without the hot set emptying; start it again and about 1/N
// of the keys move back.
func TestKillAndRestart(t *testing.T) {
	c := newCluster(t, 8)
	procs := []*proc{c.start("n1"), c.start("n2"), c.start("n3")}
	w := c.watch(t)

	rates := make(map[string]float64)
	for i := range 24 {
		rates[fmt.Sprintf("hot:%02d", i)] = 2500
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	prod := newProducer(t, c.brokers, c.topic, true)
	wg.Go(func() { prod.run(ctx, t, rates, 1000) })

	all := func() bool { return len(w.Snapshot().App("shop")) == len(rates) }
	waitFor(t, 30*time.Second, "all 24 keys hot", all)
	before := c.owners(t)
	victim := procs[0]
	t.Logf("owners before: %v; killing %s", count(before), victim.id)
	victim.kill()
	killed := time.Now()

	// Keys stay hot throughout: the dead shard's node lives for its TTL, and
	// the survivors re-detect its keys from the live stream.
	deadline := time.Now().Add(25 * time.Second)
	moved := false
	for time.Now().Before(deadline) {
		if n := len(w.Snapshot().App("shop")); n < len(rates) {
			t.Fatalf("hot set shrank to %d of %d keys %v after the kill", n, len(rates), time.Since(killed))
		}
		if o := c.owners(t); !ownedBy(o, victim.id) && len(o) == len(rates) {
			moved = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !moved {
		t.Fatalf("the killed shard's keys did not move to the survivors; owners %v", count(c.owners(t)))
	}
	after := c.owners(t)
	t.Logf("owners after the kill: %v", count(after))

	procs[0] = c.start(victim.id)
	// The restarted process first republishes the keys it held (restore),
	// then joins the ring once its old session has expired; wait until it
	// has owned keys from the live stream for 3 s in a row.
	var owning time.Time
	waitFor(t, 40*time.Second, "the restarted shard to own keys for 3s", func() bool {
		if !ownedBy(c.owners(t), victim.id) || !c.isMember(t, victim.id, procs[0].addr) {
			owning = time.Time{}
			return false
		}
		if owning.IsZero() {
			owning = time.Now()
		}
		return time.Since(owning) >= 3*time.Second
	})
	again := c.owners(t)
	var changed int
	for k, o := range again {
		if after[k] != o {
			changed++
		}
	}
	t.Logf("owners after the restart: %v; %d of %d keys moved", count(again), changed, len(rates))
	if limit := len(rates)/3 + 4; changed > limit {
		t.Errorf("%d keys moved on restart, want about 1/3 (<= %d)", changed, limit)
	}
	if n := len(w.Snapshot().App("shop")); n != len(rates) {
		t.Errorf("after the restart %d keys hot, want %d", n, len(rates))
	}
}

// owners maps each hot key of app shop to the live shard that publishes it
// (the freshest node wins while a dead shard's node ages out).
func (c *cluster) owners(t *testing.T) map[string]string {
	t.Helper()
	dir := c.root + "/hot/shop"
	shards, _, err := stacktest.ZKConn(t).Children(dir)
	if err != nil {
		return nil
	}
	out := make(map[string]string)
	newest := make(map[string]int64)
	for _, s := range shards {
		data, _, err := stacktest.ZKConn(t).Get(dir + "/" + s)
		if err != nil {
			continue
		}
		var node struct {
			Shard   string `json:"shard"`
			Updated int64  `json:"updated"`
			TTL     int64  `json:"ttl"`
			Keys    []struct {
				K string `json:"k"`
			} `json:"keys"`
		}
		if json.Unmarshal(data, &node) != nil || time.Now().UnixMilli() > node.Updated+node.TTL {
			continue
		}
		for _, k := range node.Keys {
			if node.Updated > newest[k.K] {
				out[k.K], newest[k.K] = node.Shard, node.Updated
			}
		}
	}
	return out
}

// isMember reports whether aggregator id is registered at addr.
func (c *cluster) isMember(t *testing.T, id, addr string) bool {
	data, _, err := stacktest.ZKConn(t).Get(c.root + "/members/aggregators/" + id)
	return err == nil && strings.Contains(string(data), `"addr":"`+addr+`"`)
}

func ownedBy(owners map[string]string, id string) bool {
	for _, o := range owners {
		if o == id {
			return true
		}
	}
	return false
}

func count(owners map[string]string) map[string]int {
	n := make(map[string]int)
	for _, o := range owners {
		n[o]++
	}
	return n
}

var sessions sync.Map

func (c *cluster) session(t *testing.T) *zkgroup.Session {
	if s, ok := sessions.Load(t.Name()); ok {
		return s.(*zkgroup.Session)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := zkgroup.Connect(ctx, strings.Split(c.zk, ","), zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sessions.Delete(t.Name()); s.Close() })
	sessions.Store(t.Name(), s)
	return s
}

// watch follows the cluster's hot set the way an app does.
func (c *cluster) watch(t *testing.T) *hotwatch.Watcher {
	w, err := hotwatch.New(c.session(t), hotwatch.Config{Root: c.root})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLivePage loads the page in headless Chromium against a running
// hotspotd and checks that a hot key shows up in the hot-keys table, with
// its sources (three instances sending 70, 20 and 10 % of its reads) as a
// stacked bar and its reads served from memory (the instances' effect
// reports, 95 % from L1) as a badge, and a line per instance, the busiest
// first; a screenshot of the page must show them (HOTSPOT_PAGE_PNG=FILE
// keeps it).
func TestLivePage(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (make test installs Debian's chromium)")
		}
		t.Skip("chromium is not installed")
	}
	c := newCluster(t, 4)
	p := c.start("page")
	w := c.watch(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	prod := newProducer(t, c.brokers, c.topic, false)
	wg.Go(func() { prod.run(ctx, t, map[string]float64{"item:warm": 300}, 500) })
	wg.Go(func() { sourcedReads(ctx, t, c.brokers, c.topic, "item:<on-page>", 2000) })
	waitFor(t, 20*time.Second, "the key to turn hot", func() bool {
		_, ok := w.Snapshot().Key("shop", "item:<on-page>")
		return ok
	})

	// hotspotd follows ZooKeeper through its own session: wait until it
	// lists the key, since the page's polls run on Chromium's virtual clock.
	waitFor(t, 10*time.Second, "hotspotd to list the key", func() bool {
		var got struct {
			HotKeys []struct{ Key string } `json:"hotkeys"`
		}
		getJSON(t, "http://"+p.addr+"/v1/hotkeys?app=shop", &got)
		return len(got.HotKeys) > 0
	})
	waitFor(t, 10*time.Second, "the promotion in the history", func() bool {
		var got struct{ Events []struct{ Key string } }
		getJSON(t, "http://"+p.addr+"/v1/history?app=shop", &got)
		return len(got.Events) > 0
	})
	// The key's sources and effect, as the page reads them.
	keyURL := "http://" + p.addr + "/v1/hotkeys/" + url.PathEscape("item:<on-page>") + "?app=shop"
	var st hotspotapi.KeyStatus
	defer func() {
		if t.Failed() {
			t.Logf("the key's sources when last read: %+v, %d distinct", st.Sources, st.DistinctSources)
		}
	}()
	// The detectors send a key's sketch of distinct sources once a second,
	// its busiest sources every round; the first shares come from the few
	// accesses since the key was tracked, so the test waits for them to
	// settle.
	waitFor(t, 15*time.Second, "the key's sources (web-1 first at 0.70 ± 0.05, 3 distinct) and effect", func() bool {
		getJSON(t, keyURL, &st)
		return len(st.Sources) == 3 && st.Sources[0].Source == "web-1" && math.Abs(st.Sources[0].Share-0.7) <= 0.05 &&
			st.DistinctSources == 3 && st.Effect != nil && st.Effect.L1Hits > 0
	})
	var hk hotspotapi.AppHotKeys
	waitFor(t, 5*time.Second, "served_l1 in the list", func() bool {
		getJSON(t, "http://"+p.addr+"/v1/hotkeys?app=shop", &hk)
		return len(hk.HotKeys) > 0 && hk.HotKeys[0].ServedL1 != nil
	})
	if f := *hk.HotKeys[0].ServedL1; math.Abs(f-0.95) > 0.01 {
		t.Errorf("served_l1 %v, want 0.95 (each instance reports 95 %% of its reads from L1)", f)
	}
	// --virtual-time-budget lets the page's fetches and first render finish
	// before the DOM is dumped.
	out, err := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000",
		"--dump-dom", "http://"+p.addr+"/").Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	dom := string(out)
	// The key is escaped in the page, and sits in a hot row.
	if !strings.Contains(dom, `<tr class="hot"><td class="key">item:&lt;on-page&gt;</td>`) {
		t.Fatalf("the hot key is not on the page; DOM:\n%s", dom)
	}
	if !strings.Contains(dom, `<td class="key">item:warm</td>`) {
		t.Errorf("the warm key is not among the busiest below the threshold; DOM:\n%s", dom)
	}
	if !strings.Contains(dom, `class="promoted">promoted<`) {
		t.Errorf("no promotion in the recent changes; DOM:\n%s", dom)
	}
	// The app's timeline over the last hour, from the history, has the key.
	if !strings.Contains(dom, `<svg class="timeline"`) || !strings.Contains(dom, `<title>item:&lt;on-page&gt;: `) {
		t.Errorf("the hot key is not on the app's timeline; DOM:\n%s", dom)
	}
	// Its sources bar, the busiest named, and the share served from memory.
	for _, frag := range []string{`<td class="sources"><span class="srcbar"`, `title="web-1: 7`, `<span class="srcname">web-1 7`,
		`<span class="l1 good"`, `>L1 9`} {
		if !strings.Contains(dom, frag) {
			t.Errorf("the hot key's sources or effect are not on the page: no %s; DOM:\n%s", frag, dom)
		}
	}
	// A line per instance that reported, web-1 (70 % of the reads) first.
	i1, i3 := strings.Index(dom, `<tr><td class="key">web-1</td>`), strings.Index(dom, `<tr><td class="key">web-3</td>`)
	if !strings.Contains(dom, "Instances serving its hot keys (3)") || i1 < 0 || i3 < i1 ||
		!strings.Contains(dom[i1:], `title="reads answered from its own memory (L1), last 10 s">L1 95%`) {
		t.Errorf("the instances are not on the page, web-1 first with L1 95%%; DOM:\n%s", dom)
	}
	pageScreenshot(ctx, t, chromium, "http://"+p.addr+"/")
}

// sourcedReads sends, until ctx ends, rate reads/s of key in app "shop"
// from three instances, web-1, web-2 and web-3, sending 70, 20 and 10 % of
// them (SDK batches with their source, version 3), and each instance's
// effect report every second, as hotcache sends it: 95 % of its reads
// answered from its L1, 4 % from Redis, 1 % refused by the rate limit.
func sourcedReads(ctx context.Context, t *testing.T, brokers, topic, key string, rate float64) {
	w := &kafka.Writer{Addr: kafka.TCP(strings.Split(brokers, ",")...), Topic: topic, Balancer: &kafka.RoundRobin{},
		BatchTimeout: 2 * time.Millisecond, RequiredAcks: kafka.RequireOne}
	defer w.Close()
	srcs := []struct {
		name  string
		share float64
	}{{"web-1", 0.7}, {"web-2", 0.2}, {"web-3", 0.1}}
	owed, reads := make([]float64, len(srcs)), make([]uint64, len(srcs))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last, reported := time.Now(), time.Now()
	var failing writeRetry
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		var msgs []kafka.Message
		for i, s := range srcs {
			owed[i] += rate * s.share * dt
			if n := uint64(owed[i]); n > 0 {
				owed[i] -= float64(n)
				reads[i] += n
				msgs = append(msgs, kafka.Message{Value: wire.AppendAccessesFrom(nil, "shop", s.name, now.UnixMilli(),
					[]wire.Access{{Key: key, Count: n, Op: wire.OpRead}})})
			}
		}
		if now.Sub(reported) >= time.Second {
			for i, s := range srcs {
				n := reads[i]
				eff := wire.EffectCounts{L1Hits: n * 95 / 100, L2Reads: n * 4 / 100, SourceLoads: n / 100, Limited: n / 100}
				msgs = append(msgs, kafka.Message{Value: wire.AppendEffects(nil, "shop", s.name, now.UnixMilli(),
					now.Sub(reported).Milliseconds(), []wire.Effect{{Key: key, EffectCounts: eff}})})
				reads[i] = 0
			}
			reported = now
		}
		if len(msgs) == 0 {
			continue
		}
		if _, stop := failing.write(ctx, t, w, msgs); stop {
			return
		}
	}
}

// pageScreenshot takes a screenshot of the page in headless Chromium and
// checks that it shows the busiest source's segment of the sources bar
// (#2563eb, 70 % of a 120 px bar, 10 px high) and the green L1 badge
// (#e3f4e5): the page's look, not only its DOM. HOTSPOT_PAGE_PNG=FILE
// keeps the screenshot.
func pageScreenshot(ctx context.Context, t *testing.T, chromium, pageURL string) {
	t.Helper()
	file := os.Getenv("HOTSPOT_PAGE_PNG")
	if file == "" {
		file = filepath.Join(t.TempDir(), "page.png")
	}
	out, err := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--hide-scrollbars",
		"--window-size=1600,900", "--force-device-scale-factor=1", "--screenshot="+file, pageURL).CombinedOutput()
	if err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", file, err)
	}
	count := func(c color.RGBA) int {
		n := 0
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B {
					n++
				}
			}
		}
		return n
	}
	// 0.7 × 120 px × 10 px = 840 px, less the segment's 1 px border and
	// the bar's rounded corners.
	if n := count(color.RGBA{0x25, 0x63, 0xeb, 0xff}); n < 500 {
		t.Errorf("screenshot %s: %d px of the busiest source's colour, want the 70 %% segment of the sources bar (> 500 px)", file, n)
	}
	if n := count(color.RGBA{0xe3, 0xf4, 0xe5, 0xff}); n < 100 {
		t.Errorf("screenshot %s: %d px of the L1 badge's green, want the badge (> 100 px)", file, n)
	}
	t.Logf("screenshot of the page: %s", file)
}

// TestAccuracy: Zipf background over a million keys (s = 0.8 and 1.1) with
// planted keys at 0.5x, 0.8x, 1.2x, 2x and 10x the threshold, spread over
// every partition: every key at >= 1.2x is reported, none at <= 0.8x ever is
// (background keys included, scored against the generator's ground truth).
func TestAccuracy(t *testing.T) {
	c := newCluster(t, 8)
	c.start("acc1")
	c.start("acc2")
	for _, skew := range []float64{0.8, 1.1} {
		t.Run(fmt.Sprintf("s=%.1f", skew), func(t *testing.T) {
			app := fmt.Sprintf("acc-%.1f", skew)
			var mu sync.Mutex
			seen := make(map[loadgen.AppKey]time.Time)
			w, err := hotwatch.New(c.session(t), hotwatch.Config{Root: c.root, App: app, OnChange: func(ch hotwatch.Change) {
				mu.Lock()
				defer mu.Unlock()
				for _, k := range ch.Added {
					if _, ok := seen[loadgen.AppKey{App: ch.App, Key: k.Key}]; !ok {
						seen[loadgen.AppKey{App: ch.App, Key: k.Key}] = ch.At
					}
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); w.Run(ctx) }()
			defer func() { cancel(); <-done }()
			<-w.Ready()

			st, err := loadgen.Run(context.Background(), loadgen.Config{
				Brokers: []string{c.brokers}, Topic: c.topic, App: app,
				Rate: 20_000, Keys: 1_000_000, Skew: skew, Duration: 12 * time.Second,
				Flashes: loadgen.Planted(app, 1000, 0.5, 0.8, 1.2, 2, 10),
			})
			if err != nil {
				t.Fatal(err)
			}
			if st.FailedEvents > 0 {
				t.Fatalf("%d events were not delivered to Kafka", st.FailedEvents)
			}
			time.Sleep(2 * time.Second) // the last windows settle
			mu.Lock()
			defer mu.Unlock()
			r := score.Grade(st.Truth, seen, score.Config{Threshold: 1000})
			t.Logf("recall %.3f (%d of %d), precision %.3f (%d false of %d), delay p50 %v p99 %v, generator lag %v",
				r.Recall, r.Found, r.MustReport, r.Precision, r.FalseHot, r.Reported, r.P50, r.P99, st.MaxLag)
			if r.MustReport < 3 {
				t.Fatalf("only %d keys at >= 1.2x in the truth, want the planted 1.2x, 2x and 10x at least", r.MustReport)
			}
			if len(r.Missed) > 0 {
				t.Errorf("keys at >= 1.2x never reported: %v", r.Missed)
			}
			if len(r.False) > 0 {
				t.Errorf("keys at <= 0.8x reported: %v", r.False)
			}
		})
	}
}

// writeRetry tolerates a producer's failing writes for 5 s: a new topic's
// metadata can take a moment to reach the writer, but a write that keeps
// failing fails the test.
type writeRetry struct{ since time.Time } // zero, or since when writes fail

// write writes msgs and reports whether they were written, and whether the
// producer should stop: ctx ended, or the writes failed for 5 s (reported
// on t).
func (r *writeRetry) write(ctx context.Context, t *testing.T, w *kafka.Writer, msgs []kafka.Message) (ok, stop bool) {
	err := w.WriteMessages(ctx, msgs...)
	switch {
	case err == nil:
		r.since = time.Time{}
		return true, false
	case ctx.Err() != nil:
		return false, true
	case r.since.IsZero():
		r.since = time.Now()
	case time.Since(r.since) > 5*time.Second:
		t.Errorf("produce: %v", err)
		return false, true
	}
	return false, false
}

// lastLines returns the last n lines of b.
func lastLines(b []byte, n int) []byte {
	b = bytes.TrimRight(b, "\n")
	i := len(b)
	for range n {
		j := bytes.LastIndexByte(b[:i], '\n')
		if j < 0 {
			return b
		}
		i = j
	}
	return b[i+1:]
}

// diesWithTest has a process the test starts killed when the test binary
// dies: a test that panics (go test's -timeout) runs no Cleanup, and its
// hotspotd processes would go on, loading the machine for every run after.
var diesWithTest = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
