package hotcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/router"
)

// These tests run against the real local stack (internal/stacktest) and
// write the hot set znodes themselves, as an aggregator would.

// getCalls returns how many GETs the Redis server at addr has run.
func getCalls(tb testing.TB, addr string) int64 {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_get:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

func withPromotedHook(fn func(key string, event time.Time, load time.Duration)) Option {
	return func(o *options) { o.onPromoted = fn }
}

func startInstances(t *testing.T, n int, opts ...Option) []*Client {
	t.Helper()
	cs := make([]*Client, n)
	for i := range cs {
		c, err := New(t.Context(), append([]Option{WithInstanceID(fmt.Sprint("i", i))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPromotionDelayEveryInstance changes the hot set 200 times and measures,
// on each of 4 instances, the time from the znode write to the value being
// served from L1, less the value's load time.
func TestPromotionDelayEveryInstance(t *testing.T) {
	zkAddr, redisAddr := stacktest.ZK(t), stacktest.Redis(t)
	hs := stacktest.NewHotSet(t, zkAddr)
	src := newSource()
	const changes, instances = 200, 4
	for i := range changes {
		src.data[fmt.Sprint("k", i)] = []byte("v")
	}
	var mu sync.Mutex // guards written and delays
	written := map[string]time.Time{}
	var delays []time.Duration
	// written is when the write returned (ZooKeeper committed the change);
	// issued is when the test sent it, so issued-based delays also include
	// ZooKeeper's commit (an fsync on a shared disk).
	issued := map[string]time.Time{}
	type promoted struct {
		key string
		at  time.Time // in L1, less the load time
	}
	var all []promoted
	hook := func(key string, _ time.Time, load time.Duration) {
		at := time.Now().Add(-load)
		mu.Lock()
		all = append(all, promoted{key, at})
		mu.Unlock()
	}
	startInstances(t, instances, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedis(redisAddr), WithRedisKeyPrefix(hs.App+":"), WithLoader(src), withPromotedHook(hook))
	stopProbe := schedulerProbe()
	// Each change adds one key and drops the one added 20 changes earlier,
	// so every key stays hot long enough to be loaded even when ZooKeeper
	// delivers several changes as one event.
	var window []string
	for i := range changes {
		k := fmt.Sprint("k", i)
		window = append(window, k)
		if len(window) > 20 {
			window = window[1:]
		}
		mu.Lock()
		issued[k] = time.Now()
		mu.Unlock()
		hs.Set(window...)
		mu.Lock()
		written[k] = time.Now()
		mu.Unlock()
		time.Sleep(15 * time.Millisecond)
	}
	waitFor(t, "every promotion on every instance", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(all) >= changes*instances
	})
	var fromIssue []time.Duration
	for _, p := range all {
		// An instance may have the key before the writer hears that its
		// write committed: that is a delay of 0 from the change.
		delays = append(delays, max(0, p.at.Sub(written[p.key])))
		fromIssue = append(fromIssue, p.at.Sub(issued[p.key]))
	}
	lag := stopProbe()
	slices.Sort(delays)
	p50, p99, worst := delays[len(delays)/2], delays[len(delays)*99/100], delays[len(delays)-1]
	slices.Sort(fromIssue)
	t.Logf("promotion delay over %d promotions, from the committed change: p50 %v p99 %v max %v; from the write sent: p50 %v p99 %v; scheduler lag p99 %v",
		len(delays), p50, p99, worst, fromIssue[len(fromIssue)/2], fromIssue[len(fromIssue)*99/100], lag)
	if p99 > 50*time.Millisecond {
		if lag > 5*time.Millisecond {
			// Other processes starve this one of CPU: what was measured is the
			// machine's load, not the promotion path.
			t.Skipf("promotion delay p99 = %v with a scheduler lag p99 of %v: machine overloaded, not asserted", p99, lag)
		}
		t.Errorf("promotion delay p99 = %v, want <= 50ms", p99)
	}
}

// schedulerProbe measures how late a 1 ms sleep wakes up, until the
// returned function is called; that returns the 99th percentile. It tells
// a slow code path from a machine whose CPUs other processes hold.
func schedulerProbe() func() time.Duration {
	stop := make(chan struct{})
	done := make(chan []time.Duration)
	go func() {
		var lags []time.Duration
		for {
			select {
			case <-stop:
				done <- lags
				return
			default:
			}
			start := time.Now()
			time.Sleep(time.Millisecond)
			lags = append(lags, time.Since(start)-time.Millisecond)
		}
	}()
	return func() time.Duration {
		close(stop)
		lags := <-done
		if len(lags) == 0 {
			return 0
		}
		slices.Sort(lags)
		return lags[len(lags)*99/100]
	}
}

// TestStorm reads one key hard on 4 instances, before and after it is promoted.
func TestStorm(t *testing.T) {
	zkAddr := stacktest.ZK(t)
	rs := stacktest.StartRedisServer(t)
	hs := stacktest.NewHotSet(t, zkAddr)
	src := newSource("item:1", "value")
	cs := startInstances(t, 4, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedis(rs.Addr), WithLoader(src))
	storm := func(d time.Duration) int64 {
		var reads atomic.Int64
		var wg sync.WaitGroup
		stop := time.Now().Add(d)
		for _, c := range cs {
			for range 4 {
				wg.Go(func() {
					for time.Now().Before(stop) {
						if _, err := c.Get(context.Background(), "item:1"); err != nil {
							t.Errorf("Get: %v", err)
							return
						}
						reads.Add(1)
					}
				})
			}
		}
		wg.Wait()
		return reads.Load()
	}

	g0 := getCalls(t, rs.Addr)
	reads := storm(time.Second)
	coldGets, coldLoads := getCalls(t, rs.Addr)-g0, src.loads.Load()
	t.Logf("cold: %d reads, %d Redis GETs, %d source loads", reads, coldGets, coldLoads)
	if coldLoads > 4 {
		t.Errorf("cold storm: %d source loads, want <= 4 (one per instance at most)", coldLoads)
	}
	if coldGets > reads {
		t.Errorf("cold storm: %d Redis GETs for %d reads, want no more than the reads", coldGets, reads)
	}

	hs.Set("item:1")
	for _, c := range cs {
		waitFor(t, "promotion", func() bool { return c.Hot() != nil && len(c.Hot()) == 1 && c.Hot()[0].Loaded })
	}
	g0, l0 := getCalls(t, rs.Addr), src.loads.Load()
	reads = storm(time.Second)
	hotGets, hotLoads := getCalls(t, rs.Addr)-g0, src.loads.Load()-l0
	t.Logf("hot: %d reads, %d Redis GETs, %d source loads", reads, hotGets, hotLoads)
	// Refreshes only: at most one per instance per half L1 TTL (10 s).
	if hotGets > 4 || hotLoads > 0 {
		t.Errorf("hot storm: %d Redis GETs and %d source loads, want <= 4 and 0", hotGets, hotLoads)
	}
}

// TestRedisOutage stops Redis under a running client and starts it again.
func TestRedisOutage(t *testing.T) {
	zkAddr := stacktest.ZK(t)
	rs := stacktest.StartRedisServer(t)
	hs := stacktest.NewHotSet(t, zkAddr)
	src := newSource("hot", "h", "recent", "r", "other", "o")
	c := startInstances(t, 1, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedis(rs.Addr), WithLoader(src), WithTimeout(100*time.Millisecond),
		WithBreaker(Breaker{Failures: 3, OpenFor: 300 * time.Millisecond, FallbackAge: 10 * time.Second}))[0]
	hs.Set("hot")
	waitFor(t, "promotion", func() bool { return len(c.Hot()) == 1 && c.Hot()[0].Loaded })
	get(t, c, "recent")
	c.recent.Wait()

	rs.Stop()
	for range 100 {
		if got := get(t, c, "hot"); got != "h" {
			t.Fatalf("hot key during the outage = %q, want h", got)
		}
	}
	if got := get(t, c, "recent"); got != "r" {
		t.Fatalf("recently read key during the outage = %q, want r (fallback)", got)
	}
	for range 5 { // open the breaker
		c.Get(context.Background(), "other")
	}
	if s := c.br.state.Load(); s != stateOpen {
		t.Fatalf("breaker state after failures = %d, want open", s)
	}
	start := time.Now()
	_, err := c.Get(context.Background(), "other")
	if took := time.Since(start); !errors.Is(err, ErrUnavailable) || took > 5*time.Millisecond {
		t.Fatalf("cold key with Redis down: err %v after %v, want ErrUnavailable at once", err, took)
	}
	t.Logf("cold key with the breaker open: %v in %v", err, time.Since(start))

	rs.Start()
	waitFor(t, "the breaker to close", func() bool {
		v, err := c.Get(context.Background(), "other")
		return err == nil && string(v) == "o" && c.br.state.Load() == stateClosed
	})
}

// TestInvalidationEveryInstance writes a hot key through one instance and
// measures when every instance serves the new value.
func TestInvalidationEveryInstance(t *testing.T) {
	zkAddr, redisAddr := stacktest.ZK(t), stacktest.Redis(t)
	hs := stacktest.NewHotSet(t, zkAddr)
	src := newSource("k", "v1")
	cs := startInstances(t, 4, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedis(redisAddr), WithRedisKeyPrefix(hs.App+":"), WithLoader(src))
	hs.Set("k")
	for _, c := range cs {
		waitFor(t, "promotion", func() bool { return len(c.Hot()) == 1 && c.Hot()[0].Loaded })
		if got := get(t, c, "k"); got != "v1" {
			t.Fatalf("before Set: %q, want v1", got)
		}
	}
	start := time.Now()
	if err := cs[0].Set(context.Background(), "k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	for i, c := range cs {
		waitFor(t, "the new value", func() bool {
			v, err := c.Get(context.Background(), "k")
			return err == nil && string(v) == "v2"
		})
		took := time.Since(start)
		worst = max(worst, took)
		t.Logf("instance %d serves v2 after %v", i, took)
	}
	if worst > 100*time.Millisecond {
		t.Errorf("slowest instance served the new value after %v, want <= 100ms", worst)
	}
}

// TestMissedBroadcasts kills the Client's invalidation subscription on a
// real Redis and, before it is back, writes a hot key and publishes its
// invalidation, which no one receives. Once resubscribed, the Client must
// read the key again (its value, and the replies a ReplyCache holds) instead
// of serving what it had for the rest of the L1 TTL (a minute here).
func TestMissedBroadcasts(t *testing.T) {
	srv := stacktest.StartRedisServer(t)
	c := newClient(t, WithRedis(srv.Addr), WithRedisKeyPrefix("p:"), WithLoader(newSource("k", "v1")), WithL1(0, time.Minute))
	replies := c.NewReplyCache(1 << 20)
	promote(t, c, "k")
	if got := get(t, c, "k"); got != "v1" {
		t.Fatalf("Get = %q, want v1", got)
	}
	_, tk, st := replies.Get("k", "hgetall")
	if st != HotMiss {
		t.Fatalf("ReplyCache.Get = %v, want HotMiss", st)
	}
	replies.Put(tk, []byte("old reply"))
	if got, _, st := replies.Get("k", "hgetall"); st != HotHit || string(got) != "old reply" {
		t.Fatalf("ReplyCache.Get = %q, %v, want the reply put", got, st)
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	// One pipeline, run in order by Redis' single thread: the subscriber is
	// gone before the publish.
	killed := time.Now()
	if _, err := admin.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ClientKillByFilter(ctx, "TYPE", "pubsub")
		p.Set(ctx, "p:k", "v2", 0)
		p.Publish(ctx, c.channel, "k")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the value written while unsubscribed", func() bool {
		v, err := c.Get(ctx, "k")
		return err == nil && string(v) == "v2"
	})
	t.Logf("v2 served %v after the subscription was killed", time.Since(killed).Round(time.Millisecond))
	if _, _, st := replies.Get("k", "hgetall"); st != HotMiss {
		t.Errorf("ReplyCache.Get after the subscription came back: %v, want HotMiss (read again)", st)
	}
}

// TestHotKeyOfAnotherType promotes a key that Redis holds as a hash (another
// component's, or one that proxies serve with HGETALL). Get answers Redis'
// WRONGTYPE error; the Loader is never asked (its write-back would replace
// the hash), the breaker counts no failure, and the error is kept in L1 like
// a value: no GET every refresher tick.
func TestHotKeyOfAnotherType(t *testing.T) {
	srv := stacktest.StartRedisServer(t)
	src := newSource("h", "a string")
	c := newClient(t, WithRedis(srv.Addr), WithRedisKeyPrefix("p:"), WithLoader(src))
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	admin.HSet(ctx, "p:h", "f", "v")
	c.onChange(hotwatch.Change{App: c.o.app, Added: hotKeys("h"), At: time.Now()})
	waitFor(t, "the key's value in L1", func() bool {
		e := c.hot.Load().m["h"]
		return e != nil && e.val.Load() != nil
	})
	before := getCalls(t, srv.Addr)
	for range 100 {
		if _, err := c.Get(ctx, "h"); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || errors.Is(err, ErrUnavailable) {
			t.Fatalf("Get of a hash = %v, want Redis' WRONGTYPE, not ErrUnavailable", err)
		}
	}
	time.Sleep(time.Second) // four refresher ticks
	if n := getCalls(t, srv.Addr) - before; n > 0 {
		t.Errorf("Redis ran %d GETs for 100 Gets and a second of refresher ticks, want 0", n)
	}
	if n := src.loads.Load(); n != 0 {
		t.Errorf("the Loader was asked %d times", n)
	}
	if typ := admin.Type(ctx, "p:h").Val(); typ != "hash" {
		t.Errorf("Redis holds a %s under the key, want the hash", typ)
	}
	if c.br.state.Load() != stateClosed || c.br.fails.Load() != 0 {
		t.Errorf("breaker state %d, %d failures; want closed, none", c.br.state.Load(), c.br.fails.Load())
	}
	// The key written as a string through the SDK: the new value at once.
	if err := c.Set(ctx, "h", []byte("now a string")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the string", func() bool {
		v, err := c.Get(ctx, "h")
		return err == nil && string(v) == "now a string"
	})
}

// TestReportToKafka checks that Gets reach Kafka as the SDK's binary batches.
func TestReportToKafka(t *testing.T) {
	broker := stacktest.Kafka(t)
	topic := stacktest.Name(t)
	conn, err := kafka.Dial("tcp", broker)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := conn.Controller()
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := kafka.Dial("tcp", net.JoinHostPort(ctl.Host, strconv.Itoa(ctl.Port)))
	if err != nil {
		t.Fatal(err)
	}
	err = cc.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1})
	cc.Close()
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, WithLoader(newSource("a", "1", "b", "2")), WithKafka([]string{broker}, topic))
	for range 300 {
		get(t, c, "a")
	}
	get(t, c, "b")
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	got := map[string]uint64{}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var d wire.Decoder
	for got["a"] < 300 || got["b"] < 1 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read reports: %v (so far %v)", err, got)
		}
		if m.Key != nil {
			t.Errorf("record keyed by %q, want no key", m.Key)
		}
		if err := d.Decode(m.Value, func(e *wire.Entry) {
			if string(e.App) != "shop" {
				t.Errorf("app %q, want shop", e.App)
			}
			got[string(e.Key)] += e.Count
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got["a"] != 300 || got["b"] != 1 {
		t.Errorf("reported %v, want a:300 b:1", got)
	}
}

// TestRedisShardedByRing gives the Client two Redis servers and checks each
// written-back key lands on the server Hotspot's ring names for it.
func TestRedisShardedByRing(t *testing.T) {
	r1, r2 := stacktest.StartRedisServer(t), stacktest.StartRedisServer(t)
	src := newSource()
	for i := range 200 {
		src.data[fmt.Sprint("k", i)] = []byte("v")
	}
	c := newClient(t, WithRedis(r1.Addr, r2.Addr), WithLoader(src))
	ring, err := router.New([]router.Node{{ID: r1.Addr}, {ID: r2.Addr}}, router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	conns := map[string]*redis.Client{}
	for _, a := range []string{r1.Addr, r2.Addr} {
		conns[a] = redis.NewClient(&redis.Options{Addr: a})
		defer conns[a].Close()
	}
	waitFor(t, "both Redis shards up in the ring", func() bool {
		_, err := c.rdb.Ping(context.Background()).Result()
		return err == nil
	})
	per := map[string]int{}
	for i := range 200 {
		k := fmt.Sprint("k", i)
		get(t, c, k)
		owner, _ := ring.Lookup(k)
		per[owner.ID]++
		for a, rc := range conns {
			n, err := rc.Exists(context.Background(), k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(0); a == owner.ID {
				want = 1
				if n != want {
					t.Fatalf("key %s: not on %s, the ring's owner", k, a)
				}
			} else if n != want {
				t.Fatalf("key %s: on %s, the ring's owner is %s", k, a, owner.ID)
			}
		}
	}
	t.Logf("keys per shard: %v", per)
}

func TestMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newClient(t, WithRegisterer(reg), WithLoader(newSource("a", "1")))
	promote(t, c, "a")
	get(t, c, "a")
	c.Get(context.Background(), "b")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	for _, want := range []string{"hotspot_hotcache_l1_hits_total", "hotspot_hotcache_l1_misses_total",
		"hotspot_hotcache_promotions_total", "hotspot_hotcache_promotion_delay_seconds", "hotspot_hotcache_redis_breaker_state"} {
		if !slices.Contains(names, want) {
			t.Errorf("metric %s not registered (have %v)", want, names)
		}
	}
}

// cutProxy forwards TCP connections to target, or refuses them while cut.
type cutProxy struct {
	ln     net.Listener
	target string
	cut    atomic.Bool
}

func newCutProxy(t *testing.T, target string, cut bool) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.cut.Store(cut)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.cut.Load() {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

// TestZooKeeperLate starts a Client while ZooKeeper is unreachable: New must
// not hang, reads work (nothing is hot), and once ZooKeeper answers the hot
// set arrives.
func TestZooKeeperLate(t *testing.T) {
	zkAddr := stacktest.ZK(t)
	hs := stacktest.NewHotSet(t, zkAddr)
	hs.Set("k")
	px := newCutProxy(t, zkAddr, true)
	start := time.Now()
	// The registry also checks that connecting again registers nothing twice
	// and that the session's state is exported.
	reg := prometheus.NewRegistry()
	c := newClient(t, WithApp(hs.App), WithZooKeeper([]string{px.ln.Addr().String()}, hs.Root),
		WithLoader(newSource("k", "v")), WithRegisterer(reg))
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("New with ZooKeeper unreachable took %v, want <= 4s (2s to connect, then closing the attempt)", took)
	}
	if got := get(t, c, "k"); got != "v" || c.IsHot("k") {
		t.Fatalf("Get without ZooKeeper = %q, hot %v; want v, not hot", got, c.IsHot("k"))
	}
	if got := testutil.ToFloat64(gaugeOf(t, reg, "hotspot_zk_connected")); got != 0 {
		t.Errorf("hotspot_zk_connected = %v without a session, want 0", got)
	}
	px.cut.Store(false)
	waitFor(t, "the hot set once ZooKeeper answers", func() bool { return c.IsHot("k") })
	if got := testutil.ToFloat64(gaugeOf(t, reg, "hotspot_zk_connected")); got != 1 {
		t.Errorf("hotspot_zk_connected = %v with a session, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "hotspot_hotwatch_keys"); err != nil || n != 1 {
		t.Errorf("hotspot_hotwatch_keys: %d series, %v; want 1", n, err)
	}
}

// gaugeOf returns the one gauge named name in reg, as a collector.
func gaugeOf(t *testing.T, reg *prometheus.Registry, name string) prometheus.Gauge {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name})
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			g.Set(f.GetMetric()[0].GetGauge().GetValue())
			return g
		}
	}
	t.Fatalf("%s not exported", name)
	return nil
}
