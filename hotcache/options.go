package hotcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"golang.org/x/time/rate"
)

// Option configures a Client.
type Option func(*options)

type options struct {
	app         string
	instance    string
	zkServers   []string
	zkRoot      string
	redisAddrs  []string
	redisClient redis.UniversalClient
	redisPrefix string

	redisCluster   []string // WithRedisCluster (rediscluster.go)
	redisSentinels []string // WithRedisSentinel
	redisMaster    string

	redisTTL  time.Duration
	opTimeout time.Duration
	brokers   []string
	topic     string
	loader    Loader

	l1Bytes     int64
	l1TTL       time.Duration
	hotRate     Rate
	loaderRate  Rate
	notFoundTTL time.Duration
	bloom       KeyFilter

	breakerFailures int
	breakerOpen     time.Duration
	fallbackAge     time.Duration
	fallbackBytes   int64
	doubleDelete    time.Duration

	reportEvery   time.Duration
	reportMaxKeys int
	reportSample  int
	reportBuffer  int64         // bytes of report batches handed to Kafka and not yet acknowledged
	reportRetry   time.Duration // how long a report batch Kafka does not accept is retried
	effectEvery   time.Duration // how often the hot keys' effect is reported (effect.go)

	localRate     Rate          // cold reads of one key per second before it is kept locally
	localTTL      time.Duration // how long such a key is kept
	fallback      FallbackFunc
	pendingMax    int  // invalidations queued for retry at most
	warmRate      Rate // unless warmSet: half the Loader limit
	warmSet       bool
	bulkRate      Rate // keys per second InvalidatePrefix deletes
	redisReplicas int  // R, the Redis nodes holding each hot key (replicas.go)
	tracking      bool // Redis client tracking of hot keys (tracking.go)

	reg prometheus.Registerer
	log *slog.Logger

	sec secOptions // credentials and TLS (security.go)

	// onPromoted, if set, is called when a promoted key's value is first
	// served from L1, with the time the ZooKeeper event arrived and how long
	// the value load took. Tests use it to measure promotion delays.
	onPromoted func(key string, event time.Time, load time.Duration)
	// sink, if set, replaces the Kafka sink (tests and benchmarks).
	sink sink
}

func defaults() options {
	return options{
		zkRoot:          hotset.DefaultRoot,
		redisTTL:        10 * time.Minute,
		opTimeout:       250 * time.Millisecond,
		topic:           hotset.DefaultTopic,
		l1Bytes:         64 << 20,
		l1TTL:           10 * time.Second,
		hotRate:         400,
		loaderRate:      2000,
		notFoundTTL:     30 * time.Second,
		breakerFailures: 5,
		breakerOpen:     time.Second,
		fallbackAge:     10 * time.Second,
		fallbackBytes:   16 << 20,
		doubleDelete:    500 * time.Millisecond,
		reportEvery:     100 * time.Millisecond,
		reportMaxKeys:   1 << 16,
		reportSample:    1,
		reportBuffer:    defaultReportBuffer,
		reportRetry:     kafkaio.DefaultRetryFor,
		effectEvery:     5 * time.Second,
		localRate:       400,
		localTTL:        time.Second,
		pendingMax:      10_000,
		bulkRate:        10_000,
		redisReplicas:   defaultReplicas,
		tracking:        true,
	}
}

// validate checks the options New was given, after the defaults.
func (o *options) validate() error {
	if o.app == "" {
		return errors.New("hotcache: WithApp is required")
	}
	if err := o.validateRedis(); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"WithRedisTTL", o.redisTTL}, {"WithTimeout", o.opTimeout}, {"WithNotFoundTTL", o.notFoundTTL}} {
		if d.v <= 0 {
			return fmt.Errorf("hotcache: %s: %v must be > 0", d.name, d.v)
		}
	}
	if o.doubleDelete < 0 {
		return fmt.Errorf("hotcache: WithDoubleDeleteDelay: %v must be >= 0", o.doubleDelete)
	}
	if err := validInstance(o.instance); err != nil {
		return err
	}
	return o.validateProtection()
}

// WithApp names the app whose hot set the Client follows and under which it
// reports accesses. Required.
func WithApp(name string) Option { return func(o *options) { o.app = name } }

// WithInstanceID names this instance (default "<host name>/<pid>", or
// "pid-<pid>" when the host name is unknown; "" keeps the default). The name
// is the source of every access and effect batch the Client reports (docs/
// wire.md, versions 3 and 4), so Hotspot can tell which instances send a hot
// key, and it is the "instance" attribute of the Client's log lines. It must
// be at most 1024 bytes (access.DefaultMaxKeyLen) of valid UTF-8. Give every
// instance of an app its own name (a pod name, say): two instances reporting
// under one name cannot be told apart.
func WithInstanceID(id string) Option { return func(o *options) { o.instance = id } }

// WithZooKeeper sets the ZooKeeper servers ("host:port") to watch the hot set
// on, and the root of Hotspot's nodes ("" keeps the default "/hotspot").
// Without it no key is ever hot and every Get goes to Redis.
func WithZooKeeper(servers []string, root string) Option {
	return func(o *options) {
		o.zkServers = servers
		if root != "" {
			o.zkRoot = root
		}
	}
}

// WithRedis sets the Redis servers of the shared cache (L2). One address
// means one server; several are sharded by Hotspot's consistent-hash ring
// (package router) through go-redis's Ring. For a Redis Cluster or a
// Sentinel-managed primary, see WithRedisCluster and WithRedisSentinel.
// Without Redis (none of the four options), misses go straight to the Loader.
func WithRedis(addrs ...string) Option { return func(o *options) { o.redisAddrs = addrs } }

// WithRedisClient uses an existing client for L2 and invalidations. The
// Client does not close it. Give it short timeouts and no retries: a slow
// Redis stalls every miss. A *redis.ClusterClient gets a hook that reloads
// its slot table after a call that failed without a reply (go-redis
// otherwise waits up to a minute after a master's death), and hot-key
// copies on distinct masters as with WithRedisCluster.
func WithRedisClient(c redis.UniversalClient) Option { return func(o *options) { o.redisClient = c } }

// WithRedisTracking turns Redis client tracking of hot keys on or off
// (default on). With it, a write that bypasses Hotspot (a service without
// the SDK, redis-cli) drops the key from every instance's L1 within about a
// round trip; without it, such a write reaches L1 only at the L1 TTL. It
// applies to one Redis server (WithRedis with one address, or a
// *redis.Client given to WithRedisClient, not one from NewFailoverClient)
// and costs one more connection per Client and two more commands in each
// hot-key read; Redis (6 or later) keeps the names of the hot keys each
// instance read.
func WithRedisTracking(on bool) Option { return func(o *options) { o.tracking = on } }

// WithRedisKeyPrefix prefixes every Redis key the Client reads or writes
// (default none: the cache key is the Redis key).
func WithRedisKeyPrefix(p string) Option { return func(o *options) { o.redisPrefix = p } }

// WithRedisTTL sets the TTL of values the Client writes back to Redis after
// a load (default 10 min); each write adds up to 10% jitter so a batch of
// loads does not expire at once.
func WithRedisTTL(d time.Duration) Option { return func(o *options) { o.redisTTL = d } }

// WithTimeout bounds every Redis call and every load (default 250 ms).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.opTimeout = d } }

// WithKafka sets the brokers and topic ("" keeps the default
// "hotspot.access") that access counts are reported to. Without it the
// Client reports nothing and Hotspot cannot see this app's keys.
func WithKafka(brokers []string, topic string) Option {
	return func(o *options) {
		o.brokers = brokers
		if topic != "" {
			o.topic = topic
		}
	}
}

// WithLoader sets the app's source of truth, read on a miss in Redis. If it
// also implements Writer, Set and Delete write through it.
func WithLoader(l Loader) Option { return func(o *options) { o.loader = l } }

// WithL1 sets the memory budget for values of hot keys (default 64 MiB) and
// how long a hot value is served before it must be reloaded (default 10 s;
// it is refreshed in the background between 50% and 75% of that).
// A promotion that would exceed the budget is refused and counted.
func WithL1(bytes int64, ttl time.Duration) Option {
	return func(o *options) {
		if bytes > 0 {
			o.l1Bytes = bytes
		}
		if ttl > 0 {
			o.l1TTL = ttl
		}
	}
}

// Rate is a limit in operations per second. NoLimit switches a limit off;
// zero and negative rates are refused by New.
type Rate float64

// NoLimit switches a limit off.
const NoLimit Rate = math.MaxFloat64

func (r Rate) limit() rate.Limit {
	if r >= NoLimit {
		return rate.Inf
	}
	return rate.Limit(r)
}

// burst is one second's worth of r (at least 1).
func (r Rate) burst() int {
	if r >= NoLimit || r > math.MaxInt32 {
		return math.MaxInt32
	}
	return max(1, int(r))
}

// WithHotReadLimit sets this instance's token bucket for backend reads of hot
// keys, refreshes included (default 400/s; burst one second's worth).
func WithHotReadLimit(r Rate) Option { return func(o *options) { o.hotRate = r } }

// WithLoaderLimit sets this instance's token bucket for Loader calls (default
// 2000/s; burst one second's worth). Live reads and Warm share it, so
// together they never call the Loader faster.
func WithLoaderLimit(r Rate) Option { return func(o *options) { o.loaderRate = r } }

// WithNotFoundTTL sets how long a key the Loader did not find is answered
// with ErrNotFound without asking again (default 30 s).
func WithNotFoundTTL(d time.Duration) Option { return func(o *options) { o.notFoundTTL = d } }

// WithBloomFilter sets a filter of keys that exist (KeyFilter; none by
// default): a key it rules out is answered with ErrNotFound without any
// backend read. The Client adds every key it Sets, and every key another
// instance's invalidation names (so a key Set through one instance passes
// every instance's filter once the broadcast has arrived). For a
// bits-and-blooms filter, pass bloomfilter.Wrap(f) (package
// hotcache/bloomfilter).
func WithBloomFilter(f KeyFilter) Option { return func(o *options) { o.bloom = f } }

// Breaker tunes the Redis circuit breaker. A zero field keeps its default.
type Breaker struct {
	// Failures is how many consecutive failed or timed-out Redis calls open
	// the breaker (default 5).
	Failures int
	// OpenFor is how long it stays open before one probe goes through
	// (default 1 s).
	OpenFor time.Duration
	// FallbackAge is how old a cold key's last-known value may be to be
	// served while Redis fails (default 10 s).
	FallbackAge time.Duration
}

// WithBreaker tunes the Redis circuit breaker. While it is open, a cold key
// is served from the last value read within FallbackAge, else fails at once
// with ErrUnavailable.
func WithBreaker(b Breaker) Option {
	return func(o *options) {
		o.breakerFailures = cmp.Or(b.Failures, o.breakerFailures)
		o.breakerOpen = cmp.Or(b.OpenFor, o.breakerOpen)
		o.fallbackAge = cmp.Or(b.FallbackAge, o.fallbackAge)
	}
}

// WithDoubleDeleteDelay sets the delay of the second Redis delete and
// invalidation broadcast after Set or Delete (default 500 ms).
func WithDoubleDeleteDelay(d time.Duration) Option { return func(o *options) { o.doubleDelete = d } }

// WithReporting tunes access reporting: counts are summed per key and sent
// every interval (default 100 ms); at most maxKeys distinct keys are held
// between sends (default 65536; when full, a send starts early and keys that
// still do not fit are dropped and counted); sampleOneIn > 1 counts one access
// in sampleOneIn, with that weight. Zero keeps a default.
func WithReporting(interval time.Duration, maxKeys, sampleOneIn int) Option {
	return func(o *options) {
		if interval > 0 {
			o.reportEvery = interval
		}
		if maxKeys > 0 {
			o.reportMaxKeys = maxKeys
		}
		if sampleOneIn > 0 {
			o.reportSample = sampleOneIn
		}
	}
}

// WithReportBuffer bounds the report batches handed to Kafka and not yet
// acknowledged to bytes (default 16 MiB), and sets how long a batch Kafka
// does not accept is retried, counted from when it was first handed over
// (default 60 s: past a broker's restart, so that a rolling restart of the
// brokers loses no report). Batches that retry stay in the buffer; when it
// is full, new batches are dropped at once and counted
// (reporter_dropped_accesses_total{reason="kafka"},
// reporter_dropped_effects_total), so the app never waits for Kafka. A batch
// still refused after retryFor counts in reporter_failed_records_total. Zero
// keeps a default.
func WithReportBuffer(bytes int64, retryFor time.Duration) Option {
	return func(o *options) {
		if bytes > 0 {
			o.reportBuffer = bytes
		}
		if retryFor > 0 {
			o.reportRetry = retryFor
		}
	}
}

// WithEffectReports sets how often the Client reports the effect of its hot
// keys (default 5 s; 0 keeps it): per hot key, the reads answered from L1,
// the reads that went to Redis, the loads from the Loader and the reads the
// hot-read bucket refused (docs/hotcache.md, "Source and effect"). They go
// to the access topic as effect batches, through the same Kafka writer as the
// access reports.
func WithEffectReports(every time.Duration) Option {
	return func(o *options) {
		if every > 0 {
			o.effectEvery = every
		}
	}
}

// WithRegisterer exports the Client's metrics (default: not exported).
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Loader reads the app's source of truth.
type Loader interface {
	// Load returns key's value, or an error wrapping ErrNotFound.
	Load(ctx context.Context, key string) ([]byte, error)
}

// Writer is implemented by a Loader that can also change the source of truth.
type Writer interface {
	Write(ctx context.Context, key string, value []byte) error
	Delete(ctx context.Context, key string) error
}

// LoaderFunc adapts a function to a Loader.
type LoaderFunc func(ctx context.Context, key string) ([]byte, error)

// Load calls f.
func (f LoaderFunc) Load(ctx context.Context, key string) ([]byte, error) { return f(ctx, key) }
