package routecache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/hotcache"
	"github.com/hotspot-dev/hotspot/hotcache/bloomfilter"
)

// The example's settings (seed 002).
const (
	RouteTTL      = 5 * time.Minute  // Redis TTL of a route
	NullTTL       = 30 * time.Second // an unknown shop is answered from memory this long
	FallbackAge   = 10 * time.Second // while Redis fails, a route read this recently is served
	SourceLimit   = 2000             // reads of the source of truth per second per instance
	WarmLimit     = 500              // of which a migration's warm-up takes at most
	keyPrefix     = "route:"         // cache keys are route:<shop>
	bloomFalsePos = 0.01
)

// ErrUnknownShop is returned for a shop the routing table does not have.
var ErrUnknownShop = errors.New("routecache: unknown shop")

var errNotFound = hotcache.ErrNotFound

// Config says where the Cache's services are. Empty fields leave a part out.
type Config struct {
	App         string   // Hotspot app name; required
	ZooKeeper   []string // ZooKeeper servers for the hot set
	ZKRoot      string   // "" = /hotspot
	Redis       []string // Redis servers
	RedisPrefix string   // prefix of every Redis key
	Brokers     []string // Kafka brokers for access reports
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
}

// Cache answers shop routes through hotcache.
type Cache struct {
	c     *hotcache.Client
	store Store
}

// New builds a Cache over store. Its Bloom filter starts with every shop the
// store lists (sized for twice as many, 1% false positives).
func New(ctx context.Context, store Store, cfg Config) (*Cache, error) {
	shops, err := store.Shops(ctx)
	if err != nil {
		return nil, fmt.Errorf("routecache: list shops: %w", err)
	}
	f := bloom.NewWithEstimates(uint(max(2*len(shops), 1024)), bloomFalsePos)
	for _, s := range shops {
		f.AddString(keyPrefix + s)
	}
	opts := []hotcache.Option{
		hotcache.WithApp(cfg.App),
		hotcache.WithLoader(&source{store}),
		hotcache.WithRedisTTL(RouteTTL),
		hotcache.WithNotFoundTTL(NullTTL),
		hotcache.WithBloomFilter(bloomfilter.Wrap(f)),
		hotcache.WithBreaker(hotcache.Breaker{FallbackAge: FallbackAge}),
		hotcache.WithLoaderLimit(SourceLimit),
		hotcache.WithWarmLimit(WarmLimit),
		hotcache.WithLogger(cfg.Logger),
		hotcache.WithRegisterer(cfg.Registerer),
	}
	if len(cfg.ZooKeeper) > 0 {
		opts = append(opts, hotcache.WithZooKeeper(cfg.ZooKeeper, cfg.ZKRoot))
	}
	if len(cfg.Redis) > 0 {
		opts = append(opts, hotcache.WithRedis(cfg.Redis...), hotcache.WithRedisKeyPrefix(cfg.RedisPrefix))
	}
	if len(cfg.Brokers) > 0 {
		opts = append(opts, hotcache.WithKafka(cfg.Brokers, ""))
	}
	c, err := hotcache.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return &Cache{c: c, store: store}, nil
}

// Close closes the cache client.
func (rc *Cache) Close() error { return rc.c.Close() }

// Route returns the shards that hold shop's orders.
func (rc *Cache) Route(ctx context.Context, shop string) (Shards, error) {
	v, err := rc.c.Get(ctx, keyPrefix+shop)
	if errors.Is(err, hotcache.ErrNotFound) {
		return Shards{}, fmt.Errorf("%w: %q", ErrUnknownShop, shop)
	}
	if err != nil {
		return Shards{}, err
	}
	return Decode(v)
}

// OnOrderWrite records that an order of shop was written to shard: the
// shard is ORed into the shop's bitmap in the store and the route is
// invalidated in Redis and every instance. An order on a shard the route
// already has (the common case, and a redelivered event) changes nothing.
func (rc *Cache) OnOrderWrite(ctx context.Context, shop string, shard int) error {
	if shard < 0 || shard >= MaxShards {
		return fmt.Errorf("routecache: shard %d out of range", shard)
	}
	if cur, err := rc.Route(ctx, shop); err == nil && cur.Has(shard) {
		return nil
	}
	// A new shard, a new shop, or the route could not be read: write
	// anyway, the OR is idempotent.
	// Set goes through source.Write, which ORs; it also adds the key to the
	// Bloom filter, so a new shop is found from now on.
	return rc.c.Set(ctx, keyPrefix+shop, Encode(ShardsOf(shard)))
}

// MigrationStats tells what a migration did.
type MigrationStats struct {
	Dropped int                // Redis keys deleted
	Warm    hotcache.WarmStats // the warm-up
}

// Migrate moves the routing table to a new layout: apply changes the store,
// then every route is dropped from Redis and every instance
// (InvalidatePrefix) and warmed again from the store at WarmLimit reads per
// second at most, which live misses share with the warm-up within
// SourceLimit. Routes read between the drop and their warm-up are loaded by
// the reads themselves.
func (rc *Cache) Migrate(ctx context.Context, apply func(ctx context.Context) error) (MigrationStats, error) {
	var st MigrationStats
	if err := apply(ctx); err != nil {
		return st, fmt.Errorf("routecache: migrate: %w", err)
	}
	n, err := rc.c.InvalidatePrefix(ctx, keyPrefix)
	st.Dropped = n
	if err != nil {
		return st, fmt.Errorf("routecache: migrate: %w", err)
	}
	shops, err := rc.store.Shops(ctx)
	if err != nil {
		return st, fmt.Errorf("routecache: migrate: list shops: %w", err)
	}
	keys := make([]string, len(shops))
	for i, s := range shops {
		keys[i] = keyPrefix + s
	}
	st.Warm, err = rc.c.Warm(ctx, keys)
	if err != nil {
		return st, fmt.Errorf("routecache: migrate: warm: %w", err)
	}
	return st, nil
}

// source adapts a Store to hotcache's Loader and Writer. Write ORs: the
// value it is given holds shards to add, never a whole route to replace.
type source struct{ s Store }

func (s *source) Load(ctx context.Context, key string) ([]byte, error) {
	shop, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return nil, fmt.Errorf("key %q: %w", key, hotcache.ErrNotFound)
	}
	v, err := s.s.Route(ctx, shop)
	if err != nil {
		return nil, err
	}
	// Upgrade v1 on the way into the cache: readers get v2 from Redis.
	sh, err := Decode(v)
	if err != nil {
		return nil, fmt.Errorf("shop %q: %w", shop, err)
	}
	return Encode(sh), nil
}

func (s *source) Write(ctx context.Context, key string, value []byte) error {
	add, err := Decode(value)
	if err != nil {
		return err
	}
	return s.s.AddShards(ctx, strings.TrimPrefix(key, keyPrefix), add)
}

func (s *source) Delete(ctx context.Context, key string) error {
	return errors.New("routecache: routes are never deleted, only migrated")
}
