package hotcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/kafkaio"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/router"
	"github.com/hotspot-dev/hotspot/rules"
)

// Sentinel errors. Errors returned by the Client wrap one of these, or the
// Loader's or the caller's context's error.
var (
	// ErrNotFound means the key does not exist in the source of truth.
	// Loaders return it (or an error wrapping it) for a missing key.
	ErrNotFound = errors.New("hotcache: not found")
	// ErrThrottled means a per-instance token bucket refused a backend read
	// and no stale value was at hand. It is returned at once.
	ErrThrottled = errors.New("hotcache: throttled")
	// ErrUnavailable means Redis failed (or its circuit breaker is open) and
	// no recent value of the key was at hand.
	ErrUnavailable = errors.New("hotcache: cache unavailable")
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("hotcache: client closed")
)

var errBreakerOpen = fmt.Errorf("%w: Redis circuit breaker open", ErrUnavailable)

// HotKey is one key of the app's current hot set.
type HotKey struct {
	Key    string
	Rate   float64   // the measure of its rule per second over the whole app (accesses or bytes), as published
	Since  time.Time // when it turned hot
	Pinned bool      // an operator pinned it hot
	Loaded bool      // its value is in this instance's L1
	// Rule is the index of the app's rule that made it hot; -1 for the
	// default rule, and for a pinned key or one published by a hotspotd
	// that predates rules.
	Rule int
	// Kind is why it is hot: "count" (accesses), "bytes" (bytes served) or
	// "write" (writes). A "write" key is never cached in L1.
	Kind string
}

// value is an immutable cached value.
type value struct {
	data     []byte
	notFound bool
	err      error // the key holds another type than a string in Redis (wrongType): Get's answer for it
	loaded   time.Time
	stale    bool // older than the L1 TTL and not yet refreshed: served only when a reload is refused or fails
}

func (v *value) result() ([]byte, error) {
	switch {
	case v.err != nil:
		return nil, v.err
	case v.notFound:
		return nil, ErrNotFound
	}
	return v.data, nil
}

// wrongType reports whether err is Redis' answer to a GET of a key that
// holds a hash, a list or another type. Redis answered: that is neither a
// failure of Redis (its breaker) nor a miss to fill from the Loader, whose
// write-back would replace the key.
func wrongType(err error) bool { return redis.HasErrorPrefix(err, "WRONGTYPE") }

// hotEntry is one promoted key in L1. The hot table maps keys to entries;
// an entry's value is replaced atomically, so a Get on a hot key is a map
// lookup and two atomic loads.
type hotEntry struct {
	key       string
	hits      stripedCount             // accesses since the last report
	val       atomic.Pointer[value]    // nil until loaded, and after an invalidation
	ownWrite  atomic.Pointer[ownWrite] // what this instance last wrote back to Redis after a miss, and when (tracking.go)
	gen       atomic.Uint64            // bumped by invalidations; a load installs only if unchanged
	loading   atomic.Bool              // a backend read of this key is in flight
	refreshAt atomic.Int64             // Unix ns after which the value is reloaded; 0: now
	promoted  time.Time                // when the ZooKeeper event of the promotion arrived
	delayDone atomic.Bool              // the promotion delay has been observed

	// Guarded by Client.hotMu.
	size int64 // bytes of val accounted in Client.l1Used
	dead bool  // demoted or refused: never install a value again

	// The key's effect (effect.go), last: a Get served from L1 reads val and
	// writes a stripe of hits, and these fields are written only by Gets
	// that miss L1 and by the reporter, so they stay off val's cache line.
	eff effectCount // of the accesses in hits, the Gets that L1 did not answer, by outcome
	acc effectAcc   // the effect since the last effect report; the reporter's own
}

// hotTable is an immutable map of hot entries, replaced as a whole (copy on
// write) on promotion and demotion, which are rare next to reads.
type hotTable struct{ m map[string]*hotEntry }

// Client is an app's cache client: it serves hot keys from L1 memory, other
// keys from Redis and the Loader, reports accesses to Hotspot and follows the
// hot set Hotspot publishes. It is safe for concurrent use.
type Client struct {
	o        options
	log      *slog.Logger
	m        *metrics
	instance string

	hot     atomic.Pointer[hotTable]
	hotMu   sync.Mutex // serializes writers of hot and entry installs; guards retired, l1Used and hotEntry.size/dead
	retired []*hotEntry
	l1Used  int64

	effRetired []*hotEntry // entries retired since the last effect report; the reporter's own (effect.go)

	recent  *ristretto.Cache[string, *value] // last-known values (breaker fallback) and not-found answers
	sf      singleflight.Group
	colds   sync.Map // key -> *coldRead in flight, for a promotion's load to join
	hotLim  *rate.Limiter
	loadLim *rate.Limiter
	warmLim *rate.Limiter // Warm's own pace, on top of loadLim
	bulkLim *rate.Limiter // keys per second InvalidatePrefix deletes
	br      *breaker
	guard   *localGuard   // instant local protection of keys read too often
	pending *pendingSet   // invalidations not landed yet
	invSeq  atomic.Uint64 // bumped by every local drop; a cold read started before one is not remembered
	missed  atomic.Uint64 // bumped by markAllStale: a cached reply (ReplyCache) from before is stale
	clearMu sync.Mutex    // serializes recent.Clear calls

	rdb           redis.UniversalClient
	ownRedis      bool
	logID         uint64           // names this Client in go-redis's log lines (redislog.go)
	rep           *replicas        // hot keys' copies on R nodes; nil unless several WithRedis addresses and R > 1
	track         *tracking        // Redis client tracking of hot keys with one Redis server; else nil
	ctrack        *clusterTracking // the same on a Redis Cluster; else nil
	trackWarned   atomic.Bool      // a refusal of tracking was logged
	channel       string           // invalidation Pub/Sub channel
	prefixChannel string           // prefix invalidation Pub/Sub channel

	bloom KeyFilter // nil without WithBloomFilter

	table   *countTable
	sink    sink
	kafkaTr *kafkaio.Transport         // the sink's; nil without Kafka. Its idle connections are closed by Close
	zk      atomic.Pointer[zkFollower] // nil without ZooKeeper and until connected

	loadq  chan *hotEntry
	closed atomic.Bool
	bgMu   sync.Mutex // held while adding to wg, so Close never races a late Add
	wg     sync.WaitGroup
	bg     context.Context
	cancel context.CancelFunc
}

// New starts a Client. It connects to what the options name (none of
// ZooKeeper, Redis, Kafka and the Loader is required, but without ZooKeeper
// nothing is ever hot and without Kafka Hotspot never hears of this app's
// accesses) and returns once the hot set has been read once, or after 2 s,
// or when ctx ends; the hot set then arrives in the background, and so does
// the ZooKeeper session if ZooKeeper did not answer. ctx bounds only New; the
// Client runs until Close.
func New(ctx context.Context, opts ...Option) (*Client, error) {
	o := defaults()
	for _, opt := range opts {
		opt(&o)
	}
	o.instance = cmp.Or(o.instance, defaultInstance(os.Hostname, os.Getpid()))
	if err := o.validate(); err != nil {
		return nil, err
	}
	kafkaTransport, err := o.sec.kafkaTransport(o.topic)
	if err != nil {
		return nil, err
	}
	c, err := assembleClient(o)
	if err != nil {
		return nil, err
	}
	if err := c.openRedis(); err != nil {
		return nil, err
	}
	c.setSink(kafkaTransport)
	c.bg, c.cancel = context.WithCancel(context.Background())
	c.bg = c.redisCtx(c.bg)
	c.startWorkers()
	if len(o.zkServers) > 0 {
		c.awaitHotSet(ctx, 2*time.Second)
	}
	return c, nil
}

// assembleClient returns a Client of o with its local parts (limiters, L1, the
// fallback cache, the breaker), before it connects to anything.
func assembleClient(o options) (*Client, error) {
	c := &Client{
		o:        o,
		log:      cmp.Or(o.log, slog.New(slog.DiscardHandler)),
		m:        newMetrics(o.reg),
		instance: o.instance, // New gave it its default
		hotLim:   rate.NewLimiter(o.hotRate.limit(), o.hotRate.burst()),
		loadLim:  rate.NewLimiter(o.loaderRate.limit(), o.loaderRate.burst()),
		warmLim:  newWarmLimiter(o),
		bulkLim:  rate.NewLimiter(o.bulkRate.limit(), min(o.bulkRate.burst(), bulkBatch)),
		guard:    newLocalGuard(o.localRate, o.localTTL),
		pending:  newPendingSet(o.pendingMax),
		channel:  o.redisPrefix + "hotcache:invalidate:" + o.app,
		table:    newCountTable(o.reportMaxKeys),
		loadq:    make(chan *hotEntry, 4096),
	}
	c.prefixChannel = o.redisPrefix + "hotcache:invalidate-prefix:" + o.app
	c.log = c.log.With("app", o.app, "instance", c.instance)
	c.hot.Store(&hotTable{m: map[string]*hotEntry{}})
	c.br = &breaker{failures: o.breakerFailures, openFor: o.breakerOpen, now: time.Now,
		onState: func(s int) {
			c.m.breakerState.Set(float64(s))
			c.log.Info("hotcache: Redis circuit breaker", "state", [...]string{"closed", "half-open", "open"}[s])
		}}
	c.bloom = o.bloom
	var err error
	c.recent, err = ristretto.NewCache(&ristretto.Config[string, *value]{
		NumCounters: max(o.fallbackBytes/100, 1000), // ~10 counters per entry of ~1 KB
		MaxCost:     o.fallbackBytes,
		BufferItems: 64,
	})
	if err != nil {
		return nil, fmt.Errorf("hotcache: L1 fallback cache: %w", err)
	}
	return c, nil
}

// openRedis creates the Redis clients the options name (the L2 and the hot
// keys' replicas) and routes go-redis's log lines about them to the Client's
// logger.
func (c *Client) openRedis() error {
	c.logID = redisLogIDs.Add(1)
	c.rdb, c.ownRedis = newRedis(c.o, c.redisDialer())
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		cc.AddHook(reloadOnFailure{cc})
	}
	var err error
	if c.rep, err = newReplicas(c.o, c.redisDialer(), c.rdb, c.log); err != nil {
		return err
	}
	c.track = newTracking(c.o, c.rdb, c.rep != nil, c.trackingRefused)
	if cc, ok := c.rdb.(*redis.ClusterClient); ok && c.o.tracking {
		c.ctrack = newClusterTracking(cc)
	}
	if c.rdb != nil {
		installRedisLogger()
		redisLoggers.Store(c.logID, c.log)
	}
	return nil
}

// setSink chooses where the reporter sends the access counts: the sink the
// options set, else Kafka over tr, else nowhere. tr is the Client's own, not
// kafka-go's shared default: that caches the cluster's topic list for up to
// 6 s, so a Client whose topic was created after another Client of the
// process last asked would lose its reports until the cache expires.
func (c *Client) setSink(tr *kafkaio.Transport) {
	switch {
	case c.o.sink != nil:
		c.sink = c.o.sink
	case len(c.o.brokers) > 0:
		c.sink = newKafkaSink(c.o.brokers, c.o.topic, tr, c.o.reportBuffer, c.o.reportRetry, c.m, c.log)
		c.kafkaTr = tr
	}
}

// startWorkers starts the Client's goroutines: the reporter, the L1
// refresher and loaders and, with Redis, the invalidation subscriber, the
// retries of pending invalidations, the tracking subscriber and the
// replicas' samplers.
func (c *Client) startWorkers() {
	rep := &reporter{app: c.o.app, src: c.instance, every: c.o.reportEvery, table: c.table, hot: c.drainHot, sink: c.sink, m: c.m,
		effectEvery: c.o.effectEvery, effects: c.takeEffects}
	c.spawn(func() { rep.run(c.bg) })
	c.spawn(c.refresher)
	for range 4 {
		c.spawn(c.loadWorker)
	}
	if c.rdb != nil {
		c.spawn(c.subscribe)
		c.spawn(c.retryPending)
	}
	if c.track != nil {
		c.spawn(func() { c.trackWrites(c.bg, c.track, nil) })
	}
	if c.rep != nil {
		for _, nd := range c.rep.list {
			c.spawn(func() { c.rep.sample(c.bg, nd) })
		}
	}
}

// awaitHotSet connects to ZooKeeper and waits for the first full read of
// the hot set, at most wait in all (connecting included) and no longer than
// ctx. Whatever is missing then arrives in the background.
func (c *Client) awaitHotSet(ctx context.Context, wait time.Duration) {
	start := time.Now()
	c.startZK(ctx, wait)
	z := c.zk.Load()
	if z == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, max(wait-time.Since(start), 0))
	defer cancel()
	select {
	case <-z.w.Ready():
	case <-wctx.Done():
		c.log.Warn("hotcache: hot set not read yet; it will arrive in the background")
	}
}

func newRedis(o options, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (redis.UniversalClient, bool) {
	switch {
	case o.redisClient != nil:
		return o.redisClient, false
	case len(o.redisCluster) > 0:
		return newRedisCluster(o, dial), true
	case len(o.redisSentinels) > 0:
		return newRedisSentinel(o, dial), true
	case len(o.redisAddrs) == 1:
		return redis.NewClient(&redis.Options{
			Addr: o.redisAddrs[0], Dialer: dial, DialTimeout: o.opTimeout, ReadTimeout: o.opTimeout,
			WriteTimeout: o.opTimeout, PoolTimeout: o.opTimeout, MaxRetries: -1,
			Username: o.sec.redisUser, Password: o.sec.redisPassword, // TLS: redisDialer
		}), true
	case len(o.redisAddrs) > 1:
		addrs := make(map[string]string, len(o.redisAddrs))
		for _, a := range o.redisAddrs {
			addrs[a] = a // the shard name is the ring's node ID: placement follows the address
		}
		newHash := router.ConsistentHash(router.Config{})
		return redis.NewRing(&redis.RingOptions{
			Addrs:             addrs,
			NewConsistentHash: func(shards []string) redis.ConsistentHash { return newHash(shards) },
			Dialer:            dial, DialTimeout: o.opTimeout, ReadTimeout: o.opTimeout, WriteTimeout: o.opTimeout,
			PoolTimeout: o.opTimeout, MaxRetries: -1,
			Username: o.sec.redisUser, Password: o.sec.redisPassword, // TLS: redisDialer
		}), true
	}
	return nil, false
}

// spawn runs fn in a goroutine that Close waits for. It does nothing after Close.
func (c *Client) spawn(fn func()) {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bg.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// Get returns key's value. A hot key is served from L1 memory; another key
// from Redis, else from the Loader (one load per key at a time in this
// instance, written back to Redis). Every call counts one access for Hotspot.
// A key that Redis holds as a hash or another type gets Redis' WRONGTYPE
// error, not the Loader's value. The returned slice is shared: do not modify
// it.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	v, _, err := c.lookup(ctx, key)
	return v, err
}

func (c *Client) lookup(ctx context.Context, key string) ([]byte, Served, error) {
	if c.closed.Load() {
		return nil, Fresh, ErrClosed
	}
	if e := c.hot.Load().m[key]; e != nil {
		if v := e.val.Load(); v != nil && !v.stale {
			data, err := v.result()
			c.countHot(e, len(data))
			return data, Fresh, err
		}
		data, s, out, err := c.getHot(ctx, e)
		c.countHotMiss(e, len(data), out)
		return c.withFallback(ctx, key, data, s, err)
	}
	data, s, err := c.getCold(ctx, key)
	c.countCold(key, len(data))
	return c.withFallback(ctx, key, data, s, err)
}

// countHot counts one read of a hot key answered from L1 that served size
// bytes (0 when the key does not exist); countHotMiss (effect.go) counts the
// others.
func (c *Client) countHot(e *hotEntry, size int) {
	if n := c.o.reportSample; n > 1 {
		if rand.Uint32()%uint32(n) != 0 {
			return
		}
		e.hits.add(uint64(n), uint64(n)*uint64(size))
		return
	}
	e.hits.add(1, uint64(size))
}

// countCold counts one read of a key that is not in L1 and served size bytes.
func (c *Client) countCold(key string, size int) {
	if n := c.o.reportSample; n > 1 {
		if rand.Uint32()%uint32(n) != 0 {
			return
		}
		c.table.add(key, wire.OpRead, uint64(n), uint64(n)*uint64(size))
		return
	}
	c.table.add(key, wire.OpRead, 1, uint64(size))
}

// countWrite counts one write of key (size bytes written; 0 for a delete).
// Writes are not sampled: each already costs a write to the source.
func (c *Client) countWrite(key string, size int) {
	c.table.add(key, wire.OpWrite, 1, uint64(size))
}

// getHot serves a hot key whose value is missing or stale: one backend read
// per key at a time, within the hot-read token bucket. It also says what the
// read did, for the key's effect (effect.go).
func (c *Client) getHot(ctx context.Context, e *hotEntry) ([]byte, Served, effectOutcome, error) {
	c.m.l1Misses.Inc()
	stale := e.val.Load()
	// A caller that would only join a read in flight takes no token.
	if !e.loading.Load() && !c.hotLim.Allow() {
		if stale != nil {
			c.m.throttled.WithLabelValues("hot_stale").Inc()
			data, err := stale.result()
			return data, Stale, effLimited, err
		}
		c.m.throttled.WithLabelValues("hot").Inc()
		return nil, Fresh, effLimited, ErrThrottled
	}
	ch := c.sf.DoChan("\x00hot\x00"+e.key, func() (any, error) { return c.loadHot(e) })
	select {
	case r := <-ch:
		h, _ := r.Val.(hotLoad)
		out := outcomeOf(h.tr)
		if r.Err != nil {
			if stale != nil && !errors.Is(r.Err, ErrThrottled) {
				data, err := stale.result() // a hot key outlives its backends for a while
				return data, Stale, out, err
			}
			return nil, Fresh, out, r.Err
		}
		data, err := h.v.result()
		return data, Fresh, out, err
	case <-ctx.Done():
		return nil, Fresh, 0, fmt.Errorf("hotcache: get %q: %w", e.key, ctx.Err())
	}
}

// hotLoad is the result of loadHot: the value read (nil on error) and what
// the read did.
type hotLoad struct {
	v    *value
	tr   fetchTrace
	redo bool // an invalidation, or a lost subscription, came while it ran: v may not be installed
}

// loadHot reads e's value from the backends and installs it in L1. It runs
// in a single flight per key, detached from any caller's context.
func (c *Client) loadHot(e *hotEntry) (hotLoad, error) {
	e.loading.Store(true)
	defer e.loading.Store(false)
	ctx, cancel := context.WithTimeout(c.bg, c.o.opTimeout)
	defer cancel()
	gen, missed, seq := e.gen.Load(), c.missed.Load(), c.invSeq.Load()
	superseded := func() bool { return e.gen.Load() != gen || c.missed.Load() != missed }
	start := time.Now()
	var h hotLoad
	if r := c.joinCold(ctx, e.key, seq); r != nil {
		h.v, h.tr = r.v, r.tr
		c.install(e, gen, missed, r.v, time.Since(start))
		h.redo = superseded()
		return h, nil
	}
	data, notFound, err := c.fetch(ctx, e.key, true, &h.tr)
	switch {
	case wrongType(err):
		// Kept as the key's value: its Gets get the error from L1 until it
		// is refreshed or invalidated, instead of a GET each.
		h.v = &value{err: err, loaded: time.Now()}
	case err != nil:
		return h, err
	default:
		h.v = &value{data: data, notFound: notFound, loaded: time.Now()}
	}
	c.install(e, gen, missed, h.v, h.v.loaded.Sub(start))
	h.redo = superseded()
	return h, nil
}

// coldRead is a cold read of one key in flight (getCold). A key is often
// promoted while the reads that made it hot are still waiting on Redis or
// the Loader; the promotion's load then takes that read's value rather than
// call the Loader a second time.
type coldRead struct {
	seq  uint64        // invSeq when the read started
	done chan struct{} // closed when v and tr are set
	v    *value        // nil if the read failed or an invalidation came while it ran
	tr   fetchTrace
}

// joinCold waits for the cold read of key in flight, if there is one, and
// returns it if it has a value and no invalidation came between its start and
// seq, read by the caller (nor while it ran): a value that can be installed
// under the entry generation read with seq. Otherwise it returns nil.
func (c *Client) joinCold(ctx context.Context, key string, seq uint64) *coldRead {
	x, ok := c.colds.Load(key)
	if !ok {
		return nil
	}
	r := x.(*coldRead)
	if r.seq != seq {
		return nil
	}
	select {
	case <-r.done:
		if r.v == nil {
			return nil
		}
		return r
	case <-ctx.Done():
		return nil
	}
}

// install makes v e's value unless e was invalidated since gen was read,
// invalidations may have been missed since missed was read (markAllStale),
// e was demoted, or v does not fit the L1 budget (the key is then demoted
// locally).
func (c *Client) install(e *hotEntry, gen, missed uint64, v *value, load time.Duration) {
	c.hotMu.Lock()
	if e.dead || e.gen.Load() != gen || c.missed.Load() != missed {
		c.hotMu.Unlock()
		return
	}
	size := int64(len(v.data) + len(e.key) + 256)
	if c.l1Used-e.size+size > c.o.l1Bytes {
		c.demoteLocked([]string{e.key})
		c.hotMu.Unlock()
		c.m.refused.Inc()
		c.log.Warn("hotcache: L1 budget full; key served from Redis", "key", e.key, "l1_bytes", c.o.l1Bytes)
		return
	}
	c.l1Used += size - e.size
	e.size = size
	e.val.Store(v)
	c.hotMu.Unlock()
	ttl := c.o.l1TTL
	e.refreshAt.Store(v.loaded.Add(ttl/2 + rand.N(ttl/4+1)).UnixNano()) // refresh at 50-75% of the TTL
	if !e.delayDone.Swap(true) {
		d := time.Since(e.promoted) - load
		c.m.promoDelay.Observe(d.Seconds())
		if c.o.onPromoted != nil {
			c.o.onPromoted(e.key, e.promoted, load)
		}
	}
}

// getCold serves a key that is not hot: Redis, else the Loader, one flight
// per key at a time. While Redis fails, a value read in the last fallback age
// is served instead; without one the call fails at once with ErrUnavailable.
func (c *Client) getCold(ctx context.Context, key string) ([]byte, Served, error) {
	c.m.l1Misses.Inc()
	if v := c.guard.get(key, time.Now()); v != nil {
		data, err := v.result()
		return data, Fresh, err
	}
	if v, ok := c.recent.Get(key); ok && v.notFound {
		return nil, Fresh, ErrNotFound
	}
	if c.bloom != nil && !c.bloom.MayContain(key) {
		return nil, Fresh, ErrNotFound
	}
	ch := c.sf.DoChan(key, func() (any, error) {
		ctx, cancel := context.WithTimeout(c.bg, c.o.opTimeout)
		defer cancel()
		r := &coldRead{seq: c.invSeq.Load(), done: make(chan struct{})}
		c.colds.Store(key, r)
		defer func() {
			c.colds.CompareAndDelete(key, r)
			close(r.done)
		}()
		data, notFound, err := c.fetch(ctx, key, false, &r.tr)
		if err != nil {
			return nil, err
		}
		v := &value{data: data, notFound: notFound, loaded: time.Now()}
		// A read that raced with an invalidation may hold the old value:
		// return it to the callers that were waiting, but keep no copy.
		if c.invSeq.Load() == r.seq {
			if c.guard.read(key, v, v.loaded) {
				c.m.localProtected.Inc()
			}
			c.remember(key, v)
			r.v = v
		}
		return v, nil
	})
	select {
	case r := <-ch:
		if r.Err == nil {
			data, err := r.Val.(*value).result()
			return data, Fresh, err
		}
		if errors.Is(r.Err, ErrUnavailable) {
			if v, ok := c.recent.Get(key); ok && !v.notFound && time.Since(v.loaded) <= c.o.fallbackAge {
				c.m.fallbackReads.Inc()
				return v.data, Stale, nil
			}
		}
		return nil, Fresh, r.Err
	case <-ctx.Done():
		return nil, Fresh, fmt.Errorf("hotcache: get %q: %w", key, ctx.Err())
	}
}

// remember keeps v as key's last-known value (for the breaker fallback) or
// not-found answer. The cache is lossy by design: both are best effort.
func (c *Client) remember(key string, v *value) {
	if v.notFound {
		c.recent.SetWithTTL(key, v, int64(len(key)+64), c.o.notFoundTTL)
		return
	}
	c.recent.SetWithTTL(key, v, int64(len(key)+len(v.data)+64), c.o.fallbackAge)
}

// fetch reads key from Redis, else from the Loader (writing the value back
// to Redis). For a cold key a Redis failure is returned (wrapping
// ErrUnavailable) without asking the Loader: a Redis outage must not turn
// into a stampede on the source of truth. A hot key's reads are few (one per
// key per refresh, within the hot-read bucket), so they fall through to the
// Loader. tr, if not nil, records which backends the read reached.
func (c *Client) fetch(ctx context.Context, key string, hot bool, tr *fetchTrace) (data []byte, notFound bool, err error) {
	if tr == nil {
		tr = new(fetchTrace)
	}
	redisOK := false
	var redisErr error
	// A key whose invalidation has not landed is not read from Redis, whose
	// copy may predate the write (pending.go), nor written back to it.
	if c.rdb != nil && !c.pending.covers(key) {
		if c.br.allow() {
			var data []byte
			var err error
			tr.redis = true
			if hot && c.ctrack != nil {
				c.ctrack.track(ctx, c, c.o.redisPrefix+key) // before the read: a write after it is heard
			}
			switch {
			case hot && c.rep != nil:
				data, err = c.rep.get(ctx, key) // the best of its replicas
			case hot && c.track != nil:
				data, err = c.trackedGet(ctx, c.o.redisPrefix+key)
			default:
				data, err = c.rdb.Get(ctx, c.o.redisPrefix+key).Bytes()
			}
			switch {
			case err == nil:
				c.br.success()
				c.m.loads.WithLabelValues("redis").Inc()
				return data, false, nil
			case errors.Is(err, redis.Nil):
				c.br.success()
				redisOK = true
			case wrongType(err):
				c.br.success()
				return nil, false, fmt.Errorf("hotcache: redis get %q: %w", key, err)
			default:
				c.br.failure()
				redisErr = fmt.Errorf("%w: redis get %q: %w", ErrUnavailable, key, err)
			}
		} else {
			redisErr = errBreakerOpen
		}
		if redisErr != nil && !hot {
			return nil, false, redisErr
		}
	}
	if c.o.loader == nil {
		if redisErr != nil {
			return nil, false, redisErr
		}
		return nil, true, nil // Redis is the only store: a miss there is a miss
	}
	if !c.loadLim.Allow() {
		c.m.throttled.WithLabelValues("loader").Inc()
		tr.limited = true
		return nil, false, ErrThrottled
	}
	tr.loader = true
	data, err = c.o.loader.Load(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		c.m.loads.WithLabelValues("notfound").Inc()
		return nil, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("hotcache: load %q: %w", key, err)
	}
	c.m.loads.WithLabelValues("loader").Inc()
	if redisOK && c.br.allow() {
		ttl := c.o.redisTTL + rand.N(c.o.redisTTL/10+1)
		// NX: a value another client wrote since the miss is newer than
		// the Loader's answer, and stays.
		var e *hotEntry
		var w *ownWrite
		if hot {
			if e = c.hot.Load().m[key]; e != nil {
				w = &ownWrite{at: time.Now(), data: data}
				e.ownWrite.Store(w) // before: Redis may tell of the write before it answers
			}
		}
		set := func() error {
			wrote, err := c.rdb.SetNX(ctx, c.o.redisPrefix+key, data, ttl).Result()
			if err == nil && !wrote && e != nil {
				e.ownWrite.CompareAndSwap(w, nil) // no write, no message
			}
			return err
		}
		if hot && c.rep != nil {
			set = func() error { return c.rep.setAll(ctx, key, data, ttl) }
		}
		if err := set(); err != nil {
			c.br.failure()
			c.log.Debug("hotcache: write-back to Redis failed", "key", key, "err", err)
		} else {
			c.br.success()
		}
	}
	return data, false, nil
}

// IsHot reports whether key is hot for this app right now and served from
// L1 memory (false after Close). A key hot by writes (Kind "write" in Hot)
// is never cached, so IsHot is false for it.
func (c *Client) IsHot(key string) bool {
	return !c.closed.Load() && c.hot.Load().m[key] != nil
}

// Hot returns the app's current hot keys, by rate, descending; nil after Close.
func (c *Client) Hot() []HotKey {
	z := c.zk.Load()
	if z == nil || c.closed.Load() {
		return nil
	}
	t := c.hot.Load()
	keys := z.w.Snapshot().App(c.o.app)
	out := make([]HotKey, 0, len(keys))
	for _, k := range keys {
		h := hotKeyOf(k)
		if e := t.m[k.Key]; e != nil {
			h.Loaded = e.val.Load() != nil
		}
		out = append(out, h)
	}
	return out
}

// hotKeyOf is the public form of a published key (Loaded left false).
func hotKeyOf(k hotset.Key) HotKey {
	h := HotKey{Key: k.Key, Rate: k.Rate, Pinned: k.Source == "pinned", Rule: -1, Kind: cmp.Or(k.Kind, string(rules.KindCount))}
	if k.Rule != nil {
		h.Rule = *k.Rule
	}
	if k.Since > 0 {
		h.Since = time.UnixMilli(k.Since)
	}
	return h
}

// Close stops the Client: it sends the last access counts, runs pending
// second deletes, and closes the connections it opened. Calling it again
// returns nil; every other method then returns ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.bgMu.Lock()
	c.cancel()
	c.bgMu.Unlock()
	c.wg.Wait()
	var errs []error
	if z := c.zk.Load(); z != nil {
		z.s.Close()
	}
	if c.sink != nil {
		errs = append(errs, c.sink.close())
	}
	if c.kafkaTr != nil {
		c.kafkaTr.CloseIdleConnections()
	}
	if c.track != nil {
		_ = c.track.sub.Close()
	}
	if c.ctrack != nil {
		c.ctrack.close()
	}
	if c.ownRedis {
		if err := c.rdb.Close(); err != nil {
			errs = append(errs, fmt.Errorf("hotcache: close Redis: %w", err))
		}
	}
	redisLoggers.Delete(c.logID)
	if c.rep != nil {
		errs = append(errs, c.rep.close())
	}
	c.recent.Close()
	return errors.Join(errs...)
}
