package hotcache

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestInvalidateAndPrefix changes the source behind the cache's back and
// drops one key, then a prefix, from Redis and from two instances' L1.
func TestInvalidateAndPrefix(t *testing.T) {
	zkAddr, redisAddr := stacktest.ZK(t), stacktest.Redis(t)
	hs := stacktest.NewHotSet(t, zkAddr)
	const shops = 1000
	src := newSource("other:1", "o1")
	for i := range shops {
		src.data[fmt.Sprint("shop:", i)] = []byte("old")
	}
	prefix := hs.App + ":"
	cs := startInstances(t, 2, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedis(redisAddr), WithRedisKeyPrefix(prefix), WithLoader(src), WithLoaderLimit(NoLimit),
		WithBulkLimit(2000))
	hs.Set("shop:1")
	for _, c := range cs {
		waitFor(t, "promotion", func() bool { h := c.Hot(); return len(h) == 1 && h[0].Loaded })
	}
	for i := range shops {
		get(t, cs[0], fmt.Sprint("shop:", i)) // into Redis
	}
	get(t, cs[1], "shop:5")
	get(t, cs[1], "other:1")
	cs[1].recent.Wait()

	setSource := func(v string, keys ...string) {
		src.mu.Lock()
		defer src.mu.Unlock()
		for _, k := range keys {
			src.data[k] = []byte(v)
		}
	}
	// One key, not touching the source: the Loader is not written to.
	setSource("new", "shop:1", "shop:5")
	if err := cs[0].Invalidate(context.Background(), "shop:1"); err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		waitFor(t, "shop:1's new value", func() bool {
			v, err := c.Get(context.Background(), "shop:1")
			return err == nil && string(v) == "new"
		})
		if got := get(t, c, "shop:5"); i == 1 && got != "old" {
			t.Errorf("instance 1: shop:5 after invalidating shop:1 = %q, want old (untouched)", got)
		}
	}

	// The prefix: every shop, in Redis and in both instances.
	for i := range shops {
		setSource("migrated", fmt.Sprint("shop:", i))
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	start := time.Now()
	n, err := cs[0].InvalidatePrefix(context.Background(), "shop:")
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("InvalidatePrefix deleted %d keys in %v", n, took)
	if n != shops {
		t.Errorf("deleted %d keys, want %d", n, shops)
	}
	// 2000 keys/s with a burst of 500: the last 500 keys wait 250 ms at least.
	if took < 200*time.Millisecond {
		t.Errorf("InvalidatePrefix of %d keys at 2000/s took %v, want >= 200ms", shops, took)
	}
	left, err := rdb.Keys(context.Background(), prefix+"shop:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Instances may have reloaded shop:1 (hot) and shop:5 since: only those may be back.
	for _, k := range left {
		if v, _ := rdb.Get(context.Background(), k).Result(); v != "migrated" {
			t.Errorf("Redis still holds %s = %q after InvalidatePrefix", k, v)
		}
	}
	if v, err := rdb.Get(context.Background(), prefix+"other:1").Result(); err != nil || v != "o1" {
		t.Errorf("other:1 in Redis after InvalidatePrefix(shop:) = %q, %v; want o1 (untouched)", v, err)
	}
	for _, c := range cs {
		for _, k := range []string{"shop:1", "shop:5"} {
			waitFor(t, k+"'s migrated value", func() bool {
				v, err := c.Get(context.Background(), k)
				return err == nil && string(v) == "migrated"
			})
		}
	}
	if _, err := cs[0].InvalidatePrefix(context.Background(), ""); err == nil {
		t.Error("InvalidatePrefix(\"\") = nil error, want one")
	}
}

func TestGlobEscape(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"shop:", "shop:"},
		{"a*b?c[d]e\\", `a\*b\?c\[d\]e\\`},
	} {
		if got := globEscape(tt.in); got != tt.want {
			t.Errorf("globEscape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestPrefixAndWarmOnRing runs InvalidatePrefix and Warm over two Redis
// servers sharded by the ring: every server is walked, every key is warmed.
func TestPrefixAndWarmOnRing(t *testing.T) {
	r1, r2 := stacktest.StartRedisServer(t), stacktest.StartRedisServer(t)
	src := newSource("other", "o")
	var keys []string
	for i := range 300 {
		k := fmt.Sprint("p:", i)
		src.data[k] = []byte("v")
		keys = append(keys, k)
	}
	c := newClient(t, WithRedis(r1.Addr, r2.Addr), WithLoader(src), WithLoaderLimit(NoLimit), WithWarmLimit(NoLimit))
	waitFor(t, "both Redis shards up in the ring", func() bool {
		return c.rdb.Ping(context.Background()).Err() == nil
	})
	dbsize := func() (n []int64) {
		for _, a := range []string{r1.Addr, r2.Addr} {
			rc := redis.NewClient(&redis.Options{Addr: a})
			n = append(n, rc.DBSize(context.Background()).Val())
			rc.Close()
		}
		return n
	}
	st, err := c.Warm(context.Background(), append(keys, "other"))
	if err != nil || st.Loaded != 301 {
		t.Fatalf("Warm = %+v, %v; want 301 loaded", st, err)
	}
	if n := dbsize(); n[0] == 0 || n[1] == 0 || n[0]+n[1] != 301 {
		t.Fatalf("keys per server after Warm = %v, want 301 over both", n)
	}
	n, err := c.InvalidatePrefix(context.Background(), "p:")
	if err != nil || n != 300 {
		t.Fatalf("InvalidatePrefix = %d, %v; want 300", n, err)
	}
	if n := dbsize(); n[0]+n[1] != 1 {
		t.Errorf("keys left over both servers = %v, want only \"other\"", n)
	}
}
