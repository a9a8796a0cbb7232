package proxy

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/hotcache"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// infoField reads a number from HOTSPOT INFO.
func infoField(t *testing.T, addr, field string) int64 {
	t.Helper()
	c := dialRaw(t, addr)
	defer c.close()
	m := regexp.MustCompile(field + `:(\d+)`).FindSubmatch(c.do("HOTSPOT", "INFO"))
	if m == nil {
		t.Fatalf("HOTSPOT INFO has no %s", field)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// TestHotKeyFromL1 makes keys hot in ZooKeeper, hammers them through the
// proxy and checks Redis saw next to none of the reads; a write through one
// proxy reaches another proxy and an SDK instance at once. It counts Redis'
// commands, so its Redis is its own: on the stack's, the GETs of tests
// running beside it once landed among those counted.
func TestHotKeyFromL1(t *testing.T) {
	zkAddr, redisAddr := stacktest.ZK(t), stacktest.StartRedisServer(t).Addr
	h := stacktest.NewHotSet(t, zkAddr)
	prefix := h.App + ":"
	withZK := func(c *Config) { c.ZooKeeper, c.ZooKeeperRoot, c.App = []string{zkAddr}, h.Root, h.App }
	p1 := startProxy(t, redisAddr, withZK)
	p2 := startProxy(t, redisAddr, withZK)
	sdk, err := hotcache.New(t.Context(), hotcache.WithApp(h.App), hotcache.WithZooKeeper([]string{zkAddr}, h.Root),
		hotcache.WithRedis(redisAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdk.Close() })

	hot, hash := prefix+"hot", prefix+"hash"
	rdb := newRedis(redisAddr)
	defer rdb.Close()
	ctx := context.Background()
	rdb.Set(ctx, hot, "v1", 0)
	rdb.HSet(ctx, hash, "f", "1", "g", "2")
	h.Set(hot, hash)
	waitUntil(t, 10*time.Second, "the keys hot in both proxies", func() bool {
		c1, c2 := dialRaw(t, p1.addr), dialRaw(t, p2.addr)
		defer c1.close()
		defer c2.close()
		return string(c1.do("HOTSPOT", "KEYS")) != "*0\r\n" && string(c2.do("HOTSPOT", "KEYS")) != "*0\r\n" && sdk.IsHot(hot)
	})

	// Warm: one read of each, then count.
	c := dialRaw(t, p1.addr)
	defer c.close()
	if got := string(c.do("GET", hot)); got != "$2\r\nv1\r\n" {
		t.Fatalf("GET through the proxy: %q", got)
	}
	hgetall := string(c.do("HGETALL", hash))
	time.Sleep(100 * time.Millisecond)
	gets, hgetalls := commandCalls(t, redisAddr, "get"), commandCalls(t, redisAddr, "hgetall")
	hits := infoField(t, p1.addr, "hits")
	const n = 20_000
	hammer(t, p1.addr, n, [][]string{{"GET", hot}, {"HGETALL", hash}}, []string{"$2\r\nv1\r\n", hgetall})
	dg, dh := commandCalls(t, redisAddr, "get")-gets, commandCalls(t, redisAddr, "hgetall")-hgetalls
	dhits := infoField(t, p1.addr, "hits") - hits
	t.Logf("%d GETs and %d HGETALLs through the proxy: Redis ran %d GETs and %d HGETALLs; HOTSPOT INFO hits +%d", n, n, dg, dh, dhits)
	if dg > 20 || dh > 20 {
		t.Errorf("Redis ran %d GETs and %d HGETALLs for %d reads of each hot key, want next to none", dg, dh, n)
	}
	if dhits < 2*n-20 {
		t.Errorf("HOTSPOT INFO counted %d hits, want about %d", dhits, 2*n)
	}

	// A write through p2 reaches p1's L1 and the SDK's at once.
	c2 := dialRaw(t, p2.addr)
	defer c2.close()
	if _, err := sdk.Get(ctx, hot); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c2.do("SET", hot, "v2")
	c2.do("HSET", hash, "f", "changed")
	waitUntil(t, 2*time.Second, "the new values in p1 and the SDK", func() bool {
		v, _ := sdk.Get(ctx, hot)
		return string(c.do("GET", hot)) == "$2\r\nv2\r\n" && string(c.do("HGET", hash, "f")) == "$7\r\nchanged\r\n" && string(v) == "v2"
	})
	t.Logf("a write through one proxy seen by the other proxy and an SDK instance after %v", time.Since(start).Round(time.Millisecond))
	// Read your writes on the same connection, pipelined.
	if _, err := c2.c.Write(append(encode("SET", hot, "v3"), encode("GET", hot)...)); err != nil {
		t.Fatal(err)
	}
	if c2.read(); string(c2.read()) != "$2\r\nv3\r\n" {
		t.Error("a GET pipelined after a SET on the same connection did not see it")
	}
	// The SET's invalidation reaches every L1 holding the key (p1's, p2's,
	// the SDK's), and each reads the key again from Redis at once: let that
	// be over before counting.
	before := commandCalls(t, redisAddr, "get")
	waitUntil(t, 5*time.Second, "Redis' GET count to stay still for 200 ms", func() bool {
		time.Sleep(200 * time.Millisecond)
		now := commandCalls(t, redisAddr, "get")
		still := now == before
		before = now
		return still
	})
	// Never from L1 inside MULTI, or in another database.
	c.do("MULTI")
	c.do("GET", hot)
	c.do("EXEC")
	c.do("SELECT", "1")
	if r := string(c.do("GET", hot)); r != "$-1\r\n" {
		t.Errorf("GET of the hot key in database 1: %q, want a null (no such key there)", r)
	}
	c.do("SELECT", "0")
	if d := commandCalls(t, redisAddr, "get") - before; d != 2 {
		t.Errorf("Redis ran %d GETs for a GET in MULTI and one in database 1, want those 2", d)
	}
}

// TestHotReadLimit checks that reads of a hot key that L1 cannot answer
// are bounded by the hot-read limit, the rest answered with a null, or an
// error with --limited-reply error.
//
// Its Redis is a fake.
func TestHotReadLimit(t *testing.T) {
	zkAddr, redisAddr := stacktest.ZK(t), newFakeRedis(t).addr()
	h := stacktest.NewHotSet(t, zkAddr)
	prefix := h.App + ":"
	for _, mode := range []string{"null", "error"} {
		t.Run(mode, func(t *testing.T) {
			tp := startProxy(t, redisAddr, func(c *Config) {
				c.ZooKeeper, c.ZooKeeperRoot, c.App, c.HotReadLimit, c.LimitedError = []string{zkAddr}, h.Root, h.App, 10, mode == "error"
				c.NoRedisTracking = true
			})
			key := prefix + "limited-" + mode
			rdb := newRedis(redisAddr)
			defer rdb.Close()
			rdb.HSet(context.Background(), key, "f", "v")
			h.Set(key)
			c := dialRaw(t, tp.addr)
			defer c.close()
			// HOTSPOT KEYS lists the key from the watcher's snapshot a
			// moment before the read path takes it as hot; until then a
			// read goes to Redis unlimited. A probe read counted as a miss
			// (it takes one token) says the read path has it.
			waitUntil(t, 10*time.Second, "the key hot", func() bool {
				c.do("HMGET", key, "f", "probe")
				return infoField(t, tp.addr, "misses") > 0
			})
			// Every read is a new variant: none can come from L1.
			blank := "$-1\r\n"
			if mode == "error" {
				blank = "-HOTKEY_LIMITED hotspot-proxy: hot key read over this instance's limit\r\n"
			}
			served, blanks := 0, 0
			for i := range 200 {
				switch r := string(c.do("HMGET", key, "f", strconv.Itoa(i))); r {
				case "*2\r\n$1\r\nv\r\n$-1\r\n":
					served++
				case blank:
					blanks++
				default:
					t.Fatalf("reply %q", r)
				}
			}
			t.Logf("200 distinct reads at once, limit 10/s (burst 10): %d read from Redis, %d blanks", served, blanks)
			if served > 12 || blanks < 188 {
				t.Errorf("%d served and %d blanks, want at most about 10 served", served, blanks)
			}
			if n := infoField(t, tp.addr, "limited"); n < int64(blanks) {
				t.Errorf("HOTSPOT INFO limited:%d, want %d", n, blanks)
			}
		})
	}
}

// TestMovableKeyWritesInvalidate writes hot keys with commands whose keys
// the COMMAND table's positions do not give (SORT ... STORE, MIGRATE ...
// KEYS): the proxy finds them itself (Redis' procedures) and drops them
// from L1, so the next read sees the write instead of the old value. Redis'
// client tracking would tell the proxy too: it is off here.
func TestMovableKeyWritesInvalidate(t *testing.T) {
	zkAddr, redisAddr := stacktest.ZK(t), stacktest.StartRedisServer(t).Addr
	other := stacktest.StartRedisServer(t) // MIGRATE's destination
	h := stacktest.NewHotSet(t, zkAddr)
	prefix := h.App + ":"
	p := startProxy(t, redisAddr, func(c *Config) {
		c.ZooKeeper, c.ZooKeeperRoot, c.App, c.NoRedisTracking = []string{zkAddr}, h.Root, h.App, true
	})
	sorted, moved, src := prefix+"sorted", prefix+"moved", prefix+"src"
	rdb := newRedis(redisAddr)
	defer rdb.Close()
	ctx := context.Background()
	rdb.Set(ctx, sorted, "old", 0)
	rdb.Set(ctx, moved, "here", 0)
	rdb.RPush(ctx, src, "3", "1", "2")
	h.Set(sorted, moved)
	c := dialRaw(t, p.addr)
	defer c.close()
	waitUntil(t, 10*time.Second, "both keys served from L1", func() bool {
		hits := infoField(t, p.addr, "hits")
		c.do("GET", sorted)
		c.do("GET", moved)
		return infoField(t, p.addr, "hits") >= hits+2
	})

	if got := string(c.do("SORT", src, "STORE", sorted)); got != ":3\r\n" {
		t.Fatalf("SORT ... STORE: %q", got)
	}
	if got := string(c.do("GET", sorted)); got != "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n" {
		t.Errorf("GET of a hot key SORT ... STORE made a list: %q, want WRONGTYPE", got)
	}
	host, port, _ := strings.Cut(other.Addr, ":")
	if got := string(c.do("MIGRATE", host, port, "", "0", "5000", "KEYS", moved)); got != "+OK\r\n" {
		t.Fatalf("MIGRATE ... KEYS: %q", got)
	}
	if got := string(c.do("GET", moved)); got != "$-1\r\n" {
		t.Errorf("GET of a hot key MIGRATE moved away: %q, want a null", got)
	}
}

// TestWriteThatBypassesTheProxy writes hot keys in Redis with a client of its
// own, as a service without the proxy would: Redis' client tracking tells
// the proxy, which serves the new value and reply well before the L1 TTL (a
// minute here).
func TestWriteThatBypassesTheProxy(t *testing.T) {
	zkAddr, redisAddr := stacktest.ZK(t), stacktest.StartRedisServer(t).Addr
	h := stacktest.NewHotSet(t, zkAddr)
	p := startProxy(t, redisAddr, func(c *Config) {
		c.ZooKeeper, c.ZooKeeperRoot, c.App, c.L1TTL = []string{zkAddr}, h.Root, h.App, time.Minute
	})
	hot, hash := h.App+":hot", h.App+":hash"
	rdb := newRedis(redisAddr)
	defer rdb.Close()
	ctx := context.Background()
	rdb.Set(ctx, hot, "v1", 0)
	rdb.HSet(ctx, hash, "f", "1")
	h.Set(hot, hash)
	c := dialRaw(t, p.addr)
	defer c.close()
	waitUntil(t, 10*time.Second, "both keys answered from L1", func() bool {
		hits := infoField(t, p.addr, "hits")
		c.do("GET", hot)
		c.do("HGET", hash, "f")
		return infoField(t, p.addr, "hits")-hits == 2
	})
	start := time.Now()
	rdb.Set(ctx, hot, "v2", 0)
	rdb.HSet(ctx, hash, "f", "2")
	waitUntil(t, 2*time.Second, "the values written past the proxy", func() bool {
		return string(c.do("GET", hot)) == "$2\r\nv2\r\n" && string(c.do("HGET", hash, "f")) == "$1\r\n2\r\n"
	})
	t.Logf("writes past the proxy served %v later", time.Since(start).Round(100*time.Microsecond))
}
