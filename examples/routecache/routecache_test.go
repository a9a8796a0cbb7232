package routecache

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// The whole system against the real ZooKeeper and Redis: two app instances
// over one store.
func TestRouteCache(t *testing.T) {
	zkAddr, redisAddr := stacktest.ZK(t), stacktest.Redis(t)
	ctx := context.Background()
	name := stacktest.Name(t)
	prefix := name + ":"
	store := NewMemStore()
	old, _ := EncodeV1(ShardsOf(0, 3))
	store.Put("s1", old) // written by the first deployment
	store.Put("s2", Encode(ShardsOf(40)))
	for i := range 300 {
		store.Put(fmt.Sprint("bulk", i), Encode(ShardsOf(i%16)))
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	t.Cleanup(func() {
		keys, _ := rdb.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	var cs []*Cache
	for range 2 {
		c, err := New(ctx, store, Config{App: name, ZooKeeper: []string{zkAddr}, ZKRoot: "/" + name,
			Redis: []string{redisAddr}, RedisPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	a, b := cs[0], cs[1]

	route := func(c *Cache, shop string) Shards {
		t.Helper()
		s, err := c.Route(ctx, shop)
		if err != nil {
			t.Fatalf("Route(%q): %v", shop, err)
		}
		return s
	}
	// v1 values are read (and upgraded); v2 values of any width.
	if got := route(a, "s1"); !got.Equal(ShardsOf(0, 3)) {
		t.Errorf("s1 = %v, want [0 3]", got)
	}
	if got := route(a, "s2"); !got.Equal(ShardsOf(40)) {
		t.Errorf("s2 = %v, want [40]", got)
	}
	if v, _ := rdb.Get(ctx, prefix+"route:s1").Bytes(); len(v) == 0 || v[0] != v2 {
		t.Errorf("s1 in Redis = %x, want a v2 value", v)
	}
	if ttl := rdb.TTL(ctx, prefix+"route:s1").Val(); ttl < 4*time.Minute || ttl > RouteTTL*11/10 {
		t.Errorf("route TTL in Redis = %v, want 5 min (+10%% jitter)", ttl)
	}

	// Unknown shops: the Bloom filter answers, the store is not read.
	reads := store.Reads.Load()
	for i := range 100 {
		if _, err := a.Route(ctx, fmt.Sprint("nope", i)); !errors.Is(err, ErrUnknownShop) {
			t.Fatalf("unknown shop: %v, want ErrUnknownShop", err)
		}
	}
	if n := store.Reads.Load() - reads; n > 5 {
		t.Errorf("100 unknown shops read the store %d times, want a few at most (Bloom false positives)", n)
	}

	// An order on a new shard: ORed in, seen by both instances.
	if err := a.OnOrderWrite(ctx, "s1", 20); err != nil {
		t.Fatal(err)
	}
	if got := route(a, "s1"); !got.Equal(ShardsOf(0, 3, 20)) {
		t.Errorf("writer: s1 after an order on shard 20 = %v, want [0 3 20]", got)
	}
	waitFor(t, "instance b to see shard 20", func() bool { s, err := b.Route(ctx, "s1"); return err == nil && s.Has(20) })
	// Redelivered, or on a shard it has: nothing is written.
	writes := store.Writes.Load()
	for range 3 {
		if err := b.OnOrderWrite(ctx, "s1", 20); err != nil {
			t.Fatal(err)
		}
		if err := b.OnOrderWrite(ctx, "s1", 3); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.Writes.Load() - writes; n != 0 {
		t.Errorf("orders on known shards wrote the store %d times, want 0", n)
	}
	// A new shop: the Bloom filter of the writer learns it.
	if err := b.OnOrderWrite(ctx, "s3", 7); err != nil {
		t.Fatal(err)
	}
	if got := route(b, "s3"); !got.Equal(ShardsOf(7)) {
		t.Errorf("new shop s3 = %v, want [7]", got)
	}
	// ... and so does every other instance's, from the broadcast.
	waitFor(t, "instance a to know shop s3", func() bool { s, err := a.Route(ctx, "s3"); return err == nil && s.Equal(ShardsOf(7)) })

	// A migration: every shop moves to shards 64 and up.
	for i := range 300 {
		route(a, fmt.Sprint("bulk", i))
		route(b, fmt.Sprint("bulk", i))
	}
	layout := map[string]Shards{}
	shops, _ := store.Shops(ctx)
	for _, s := range shops {
		var moved []int
		for _, n := range route(a, s).List() {
			moved = append(moved, n+64)
		}
		layout[s] = ShardsOf(moved...)
	}
	st, err := a.Migrate(ctx, func(ctx context.Context) error { store.Replace(layout); return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("migration: %+v", st)
	if st.Dropped < 300 || st.Warm.Loaded+st.Warm.Present != len(shops) {
		t.Errorf("migration stats %+v, want >= 300 dropped and %d warmed", st, len(shops))
	}
	for _, c := range cs {
		for _, s := range []string{"s1", "s2", "bulk7"} {
			waitFor(t, "the migrated route of "+s, func() bool {
				got, err := c.Route(ctx, s)
				return err == nil && got.Equal(layout[s])
			})
		}
	}
	if v, err := rdb.Get(ctx, prefix+"route:bulk250").Bytes(); err != nil {
		t.Errorf("bulk250 not in Redis after the warm-up: %v", err)
	} else if got, _ := Decode(v); !got.Equal(layout["bulk250"]) {
		t.Errorf("bulk250 in Redis = %v, want %v", got, layout["bulk250"])
	}
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
