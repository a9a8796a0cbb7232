package hotcache

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// trackingOn waits until c's tracking subscriber is confirmed and returns
// its connection ID.
func trackingOn(t *testing.T, c *Client) int64 {
	t.Helper()
	if c.track == nil {
		t.Fatal("tracking is off")
	}
	waitFor(t, "the tracking subscription", func() bool { return c.track.id.Load() != 0 })
	return c.track.id.Load()
}

// TestWriteThatBypassesHotspot writes a hot key in Redis with a client of its
// own, as a service without the SDK would: with tracking, L1 serves the new
// value within a round trip or so, not at the L1 TTL (a minute here); without
// it, the old value stays.
func TestWriteThatBypassesHotspot(t *testing.T) {
	srv := stacktest.StartRedisServer(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()

	t.Run("tracked", func(t *testing.T) {
		c := newClient(t, WithRedis(srv.Addr), WithRedisKeyPrefix("p:"), WithLoader(newSource("k", "v1")), WithL1(0, time.Minute))
		trackingOn(t, c)
		promote(t, c, "k")
		if got := get(t, c, "k"); got != "v1" {
			t.Fatalf("Get = %q, want v1", got)
		}
		written := time.Now()
		admin.Set(ctx, "p:k", "v2", 0)
		waitFor(t, "the value written past Hotspot", func() bool { return get(t, c, "k") == "v2" })
		took := time.Since(written)
		t.Logf("v2 served %v after the write", took.Round(100*time.Microsecond))
		if took > time.Second {
			t.Errorf("v2 served %v after the write, want well under the L1 TTL", took)
		}
		if n := testutil.ToFloat64(c.m.invalidations.WithLabelValues("tracked")); n < 1 {
			t.Errorf("invalidations_total{dir=tracked} = %v, want at least 1", n)
		}
		// The reload was tracked again: a second write is seen too.
		admin.Set(ctx, "p:k", "v3", 0)
		waitFor(t, "a second write past Hotspot", func() bool { return get(t, c, "k") == "v3" })
	})

	t.Run("off", func(t *testing.T) {
		c := newClient(t, WithRedis(srv.Addr), WithRedisKeyPrefix("q:"), WithLoader(newSource("k", "v1")), WithL1(0, time.Minute),
			WithRedisTracking(false))
		if c.track != nil {
			t.Fatal("tracking on with WithRedisTracking(false)")
		}
		promote(t, c, "k")
		admin.Set(ctx, "q:k", "v2", 0)
		time.Sleep(500 * time.Millisecond)
		if got := get(t, c, "k"); got != "v1" {
			t.Fatalf("Get = %q without tracking, want the L1 copy v1 until the TTL", got)
		}
	})
}

// TestTrackingAfterReconnect kills the subscriber's connection: reads
// redirect to the new one once it is subscribed, and a write past Hotspot
// after that is seen. A FLUSHALL marks every hot value stale.
func TestTrackingAfterReconnect(t *testing.T) {
	srv := stacktest.StartRedisServer(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	c := newClient(t, WithRedis(srv.Addr), WithLoader(newSource("k", "v1")), WithL1(0, time.Minute))
	first := trackingOn(t, c)
	promote(t, c, "k")
	if err := admin.ClientKillByFilter(ctx, "ID", strconv.FormatInt(first, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new tracking subscription", func() bool {
		id := c.track.id.Load()
		return id != 0 && id != first
	})
	waitFor(t, "the reload after the resubscription", func() bool {
		v := c.hot.Load().m["k"].val.Load()
		return v != nil && !v.stale
	})
	admin.Set(ctx, "k", "v2", 0)
	waitFor(t, "a write past Hotspot after the reconnection", func() bool { return get(t, c, "k") == "v2" })

	admin.FlushAll(ctx)
	waitFor(t, "the source's value after FLUSHALL", func() bool { return get(t, c, "k") == "v1" })
}

// TestTrackedHashKey: a hot key that Redis holds as a hash is tracked by its
// (refused) GET, so a change to the hash drops the replies a ReplyCache
// keeps for it (hotspot-proxy's HGETALL and the like).
func TestTrackedHashKey(t *testing.T) {
	srv := stacktest.StartRedisServer(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	admin.HSet(ctx, "h", "f", "v1")
	c := newClient(t, WithRedis(srv.Addr), WithL1(0, time.Minute))
	trackingOn(t, c)
	replies := c.NewReplyCache(1 << 20)
	c.onChange(hotwatch.Change{App: c.o.app, Added: hotKeys("h"), At: time.Now()})
	waitFor(t, "the key's value in L1", func() bool {
		e := c.hot.Load().m["h"]
		return e != nil && e.val.Load() != nil
	})
	_, tk, st := replies.Get("h", "hgetall")
	if st != HotMiss {
		t.Fatalf("ReplyCache.Get = %v, want HotMiss", st)
	}
	replies.Put(tk, []byte("old reply"))
	admin.HSet(ctx, "h", "f", "v2")
	waitFor(t, "the reply dropped after HSET past Hotspot", func() bool {
		_, _, st := replies.Get("h", "hgetall")
		return st == HotMiss
	})
}

// TestTrackingRefused runs two instances as a Redis user that may not run
// CLIENT nor subscribe to __redis__:invalidate: tracking is off (counted,
// logged), and everything else works as without it: hot keys from L1, and a
// Set on one instance reaches the other through the broadcast.
func TestTrackingRefused(t *testing.T) {
	srv := stacktest.StartRedisServer(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "limited", "on", ">pw", "~*", "resetchannels", "&*hotcache:*", "+@all", "-client").Err(); err != nil {
		t.Fatal(err)
	}
	src := newSource("k", "v1")
	opts := []Option{WithRedis(srv.Addr), WithRedisAuth("limited", "pw"), WithLoader(src), WithL1(0, time.Minute)}
	a, b := newClient(t, opts...), newClient(t, opts...)
	waitFor(t, "tracking refused", func() bool {
		return testutil.ToFloat64(a.m.trackingRefused) >= 1 && testutil.ToFloat64(b.m.trackingRefused) >= 1
	})
	promote(t, a, "k")
	promote(t, b, "k")
	if a.track.id.Load() != 0 || b.track.id.Load() != 0 {
		t.Fatal("tracking on for a user without CLIENT")
	}
	if err := a.Set(ctx, "k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the write broadcast to the other instance", func() bool { return get(t, b, "k") == "v2" })
}

// TestOwnWriteBackKeepsL1: a hot key missing in Redis is loaded from the
// source and written back; Redis then tells the instance of that write (its
// own), which finds Redis holding its L1 value and keeps it: no reload. A
// write of another value after it is still seen.
func TestOwnWriteBackKeepsL1(t *testing.T) {
	srv := stacktest.StartRedisServer(t)
	c := newClient(t, WithRedis(srv.Addr), WithLoader(newSource("k", "v1")), WithL1(0, time.Minute))
	trackingOn(t, c)
	promote(t, c, "k")
	tracked := func() float64 { return testutil.ToFloat64(c.m.invalidations.WithLabelValues("tracked")) }
	waitFor(t, "Redis telling of the write-back", func() bool { return tracked() >= 1 })
	time.Sleep(50 * time.Millisecond)
	if n := testutil.ToFloat64(c.m.loads.WithLabelValues("redis")); n != 0 {
		t.Errorf("%v loads from Redis after the instance's own write-back, want 0", n)
	}
	if v := c.hot.Load().m["k"].val.Load(); v == nil || string(v.data) != "v1" {
		t.Fatalf("L1 after the write-back: %+v, want v1 kept", v)
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	admin.Set(context.Background(), "k", "v2", 0)
	waitFor(t, "the write past Hotspot", func() bool { return get(t, c, "k") == "v2" })
}

// TestTrackingRefusedOnRead: a user that may take its connection's ID and
// the channel, but not CLIENT TRACKING (as a Redis before 6 answers): the
// first hot read is answered untracked and counted, and the reads after it
// do not ask again for trackingRetry.
func TestTrackingRefusedOnRead(t *testing.T) {
	srv := stacktest.StartRedisServer(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "notrack", "on", ">pw", "~*", "&*", "+@all", "-client|tracking", "-client|caching").Err(); err != nil {
		t.Fatal(err)
	}
	src := newSource("k", "v1")
	c := newClient(t, WithRedis(srv.Addr), WithRedisAuth("notrack", "pw"), WithLoader(src), WithL1(0, time.Minute))
	waitFor(t, "the tracking connection's ID", func() bool { return c.track.id.Load() != 0 })
	promote(t, c, "k")
	for i := range 5 {
		c.dropLocal("k")
		if got := get(t, c, "k"); got != "v1" {
			t.Fatalf("read %d after a drop: %q, want v1", i, got)
		}
	}
	if n := testutil.ToFloat64(c.m.trackingRefused); n != 1 {
		t.Errorf("redis_tracking_refused_total = %v after 6 hot reads, want 1: the reads after the first asked again", n)
	}
	stats, err := admin.Do(ctx, "INFO", "commandstats").Text()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stats, "\n") {
		if strings.HasPrefix(line, "cmdstat_client|tracking:") && !strings.Contains(line, "rejected_calls=1,") {
			t.Errorf("CLIENT TRACKING sent more than once: %s", line)
		}
	}
}

// BenchmarkWriteToEveryL1 measures, per write of a hot key, the time until
// every one of 4 instances serves the new value: written past Hotspot by
// another client (tracking: Redis tells each instance), or through one of
// the instances (Set: its broadcast; also with tracking off, for what
// tracking adds to it). Each instance is polled every 20 µs,
// so the figures carry up to that much. The hot-read limit is off: it would
// pace each instance's reloads, one per write, to 400 a second. Reported: the mean (ns/op), and the
// median and 99th percentile of the slowest instance's delay per write.
func BenchmarkWriteToEveryL1(b *testing.B) {
	srv := stacktest.StartRedisServer(b)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	for _, via := range []string{"tracking", "broadcast", "broadcast-untracked"} {
		b.Run(via, func(b *testing.B) {
			prefix := via + ":"
			src := newSource("k", "v")
			cs := make([]*Client, 4)
			for i := range cs {
				cs[i] = newClient(b, WithRedis(srv.Addr), WithRedisKeyPrefix(prefix), WithLoader(src), WithL1(0, time.Minute),
					WithHotReadLimit(NoLimit), WithRedisTracking(via != "broadcast-untracked"))
				for cs[i].track != nil && cs[i].track.id.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
				promote(b, cs[i], "k")
			}
			writeToEveryL1(b, cs, func(v string) error {
				if via == "tracking" {
					return admin.Set(ctx, prefix+"k", v, 0).Err()
				}
				return cs[0].Set(ctx, "k", []byte(v))
			})
		})
	}
}

// writeToEveryL1 runs b.N writes of hot key "k" with write, one after the
// other, and reports the median and 99th percentile of the time until every
// one of cs serves each (polled every 20 µs).
func writeToEveryL1(b *testing.B, cs []*Client, write func(v string) error) {
	ctx := context.Background()
	var delays []time.Duration
	b.ResetTimer()
	for i := range b.N {
		v := "v" + strconv.Itoa(i)
		start := time.Now()
		if err := write(v); err != nil {
			b.Fatal(err)
		}
		for _, c := range cs {
			for {
				got, err := c.Get(ctx, "k")
				if err == nil && string(got) == v {
					break
				}
				if time.Since(start) > 5*time.Second {
					b.Fatalf("write %d not served after 5 s", i)
				}
				time.Sleep(20 * time.Microsecond)
			}
		}
		delays = append(delays, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkHotReload compares one hot-key read from Redis with tracking
// (CLIENT TRACKING, CLIENT CACHING, GET in one round trip) and without (a
// GET), one call at a time: what tracking adds to each reload.
func BenchmarkHotReload(b *testing.B) {
	srv := stacktest.StartRedisServer(b)
	for _, tracked := range []bool{false, true} {
		b.Run(map[bool]string{false: "get", true: "tracked"}[tracked], func(b *testing.B) {
			c := newClient(b, WithRedis(srv.Addr), WithRedisTracking(tracked))
			if tracked {
				for c.track.id.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			c.rdb.Set(context.Background(), "k", "v", 0)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if _, err := c.trackedGet(ctx, "k"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestNoTrackingWithoutOneServer: tracking is for one Redis server only; a
// Sentinel client (made by the Client or given to it) changes servers at a
// failover, where a redirect could name another server's client.
func TestNoTrackingWithoutOneServer(t *testing.T) {
	failover := func() *redis.Client {
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
		t.Cleanup(func() { c.Close() })
		return c
	}
	for name, o := range map[string]options{
		"WithRedisSentinel": {tracking: true, redisSentinels: []string{"127.0.0.1:1"}, redisMaster: "m"},
		"WithRedisClient":   {tracking: true},
	} {
		if tr := newTracking(o, failover(), false, func(error) {}); tr != nil {
			t.Errorf("%s: tracking on for a Sentinel client", name)
		}
	}
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer single.Close()
	if tr := newTracking(options{tracking: true}, single, false, func(error) {}); tr == nil {
		t.Error("tracking off for one server")
	} else {
		tr.sub.Close()
	}
	if tr := newTracking(options{tracking: true}, single, true, func(error) {}); tr != nil {
		t.Error("tracking on with hot-key replicas")
	}
}

// TestTrackingAfterRedisRestart restarts the Redis server (its client IDs
// start again from 1): reads do not redirect to the old ID meanwhile, and
// once the tracking connection is back a write past Hotspot is seen.
func TestTrackingAfterRedisRestart(t *testing.T) {
	srv := stacktest.StartRedisServer(t)
	c := newClient(t, WithRedis(srv.Addr), WithLoader(newSource("k", "v1")), WithL1(0, time.Minute))
	first := trackingOn(t, c)
	promote(t, c, "k")
	before := c.hot.Load().m["k"].val.Load()
	srv.Stop()
	waitFor(t, "the tracking connection's loss", func() bool { return c.track.id.Load() == 0 })
	srv.Start()
	waitFor(t, "a new tracking subscription", func() bool { return c.track.id.Load() != 0 })
	t.Logf("tracking connection ID %d before the restart, %d after", first, c.track.id.Load())
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	waitFor(t, "the reload after the resubscription", func() bool {
		v := c.hot.Load().m["k"].val.Load()
		return v != nil && v != before && !v.stale
	})
	// The write may land before the reload's write-back (Redis lost the key
	// in the restart), which then keeps it (SET NX).
	admin.Set(ctx, "k", "v2", 0)
	waitFor(t, "a write past Hotspot after the restart", func() bool { return get(t, c, "k") == "v2" })
	if n := testutil.ToFloat64(c.m.trackingRefused); n != 0 {
		t.Errorf("redis_tracking_refused_total = %v, want 0: a read redirected to a dead ID", n)
	}
}

// racingLoader writes a newer value into Redis while it loads, as another
// client writing the key between a miss and its write-back would.
type racingLoader struct {
	rdb *redis.Client
	key string
}

func (l racingLoader) Load(ctx context.Context, key string) ([]byte, error) {
	if err := l.rdb.Set(ctx, l.key, "newer", 0).Err(); err != nil {
		return nil, err
	}
	return []byte("older"), nil
}

// TestWriteBackKeepsANewerValue: the write-back after a miss does not
// replace a value another client wrote since the miss.
func TestWriteBackKeepsANewerValue(t *testing.T) {
	srv := stacktest.StartRedisServer(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	c := newClient(t, WithRedis(srv.Addr), WithRedisKeyPrefix("p:"), WithLoader(racingLoader{admin, "p:k"}))
	if got := get(t, c, "k"); got != "older" {
		t.Fatalf("Get = %q, want the Loader's answer", got)
	}
	if got, err := admin.Get(context.Background(), "p:k").Result(); err != nil || got != "newer" {
		t.Errorf("Redis holds %q (%v) after the write-back, want the newer value", got, err)
	}
}
