package router_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/router"
)

// TestGoRedisRing plugs router.ConsistentHash into a real go-redis Ring and
// checks that every key is stored on the shard router says. The two shards
// are two databases of the local Redis: NewClient maps each shard name to
// its database.
func TestGoRedisRing(t *testing.T) {
	addr := stacktest.Redis(t)
	prefix := stacktest.Name(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dbs := map[string]int{"shard-a": 1, "shard-b": 2}
	newHash := router.ConsistentHash(router.Config{})
	rdb := redis.NewRing(&redis.RingOptions{
		Addrs: map[string]string{"shard-a": "shard-a", "shard-b": "shard-b"},
		NewClient: func(opt *redis.Options) *redis.Client {
			opt.DB, opt.Addr = dbs[opt.Addr], addr
			return redis.NewClient(opt)
		},
		NewConsistentHash: func(shards []string) redis.ConsistentHash { return newHash(shards) },
	})
	defer rdb.Close()
	direct := map[string]*redis.Client{}
	for name, db := range dbs {
		c := redis.NewClient(&redis.Options{Addr: addr, DB: db})
		defer c.Close()
		direct[name] = c
	}

	ring := mustNew(t, []router.Node{{ID: "shard-a"}, {ID: "shard-b"}}, router.Config{})
	type probe struct{ key, hashed string } // hashed: what go-redis hashes
	var probes []probe
	for i := range 200 {
		k := fmt.Sprintf("%s:item:%d", prefix, i)
		probes = append(probes, probe{k, k})
	}
	for i := range 20 { // a {hash tag} routes by the tag alone
		tag := fmt.Sprintf("%s:user:%d", prefix, i)
		probes = append(probes, probe{"{" + tag + "}:profile", tag})
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, p := range probes {
			rdb.Del(ctx, p.key)
		}
	})

	perShard := map[string]int{}
	for _, p := range probes {
		if err := rdb.Set(ctx, p.key, "v", time.Minute).Err(); err != nil {
			t.Fatalf("SET %s through the ring: %v", p.key, err)
		}
		want, _ := ring.Lookup(p.hashed)
		perShard[want.ID]++
		for name, c := range direct {
			n, err := c.Exists(ctx, p.key).Result()
			if err != nil {
				t.Fatalf("EXISTS %s on %s: %v", p.key, name, err)
			}
			if got, wantN := n, int64(0); name == want.ID {
				wantN = 1
				if got != wantN {
					t.Errorf("key %s: not on %s, where router puts it", p.key, name)
				}
			} else if got != wantN {
				t.Errorf("key %s: found on %s, router puts it on %s", p.key, name, want.ID)
			}
		}
	}
	if perShard["shard-a"] == 0 || perShard["shard-b"] == 0 {
		t.Errorf("keys per shard = %v, want both shards used", perShard)
	}
}
