package hotcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/router"
)

// Hot-key replicas.
//
// With several Redis addresses, the node that owns a hot key on the ring is
// the one that melts: before promotion, and after it for every instance whose
// L1 has no value yet (just promoted, invalidated or due for a refresh). So
// a hot key's L2 value is copied to its first R nodes in ring order
// (router.Ring.LookupN; the owner first) and each read of it goes to a
// replica that router.Picker scores among the best from this instance's own
// measurements. Cold keys stay on their owner alone.
//
//   - Read: Pick a replica among the R (at random among those within
//     pickerTolerance of the best score). A hit is the answer. A miss on a
//     replica other than the owner reads the owner and, on a hit there,
//     copies the value to the replica (read repair). A miss on the owner is a
//     miss: the Loader's value is then written to all R. A failed call marks
//     the node unhealthy for the Picker and the read is retried once on the
//     replica it picks next.
//   - Write-back after a load from the Loader: SET on all R replicas.
//   - Invalidation (Set, Delete, and the delayed second delete): DEL on all R
//     replicas of every key, hot or not here: another instance may have
//     replicated it, or this key may have been hot a moment ago.
//
// On a Redis Cluster the nodes are hash tags, one per master, and the
// untagged key is the copy of record that a replica's miss reads and
// repairs from (rediscluster.go).
//
// Measurements. Every sampleEvery, a sampler per node turns this instance's
// calls to the node since the last tick into one router.Sample: the hit ratio
// of its GETs, its load (calls in flight / pool size), its latency (the mean
// of the GETs that completed, or the mean age of the calls still in flight if
// that is longer: a node that hangs looks slow at once, not when its calls
// time out) and its staleness (how long since it last answered). A node that
// had no call in the interval is PINGed for the latency; its hit ratio
// drifts back towards 1 while nobody reads it. One sample per node per
// interval, whatever the read rate, so the Picker weighs nodes by time, not
// by call count: a slowed node that completes few calls is not outweighed by
// its own past, and a node the Picker left keeps fresh samples and wins
// reads back once it is fast again. The samplers sleep while this instance
// reads no hot key from Redis (within sampleFor): with a warm L1 it sends
// no PINGs, and a refresh after a pause finds the old samples faded to
// neutral, so it spreads at random.

const (
	// defaultReplicas is R when WithRedisReplicas is not given.
	defaultReplicas = 3
	// sampleEvery is the interval of the samples fed to the Picker.
	sampleEvery = 50 * time.Millisecond
	// sampleFor is how long the samplers run after a hot-key read.
	sampleFor = 2 * time.Second
	// pickerHalfLife is the half-life of the Picker's samples: 6 samples,
	// so that a node that slows down loses its reads within a second.
	pickerHalfLife = 300 * time.Millisecond
	// pickerTolerance spreads a hot key's reads evenly over the replicas
	// that score within it of the best. Equal nodes differ by a few
	// hundredths (latency noise, this instance's own load on each); a node
	// 10 ms slower than the others scores about 0.15 less on latency alone.
	pickerTolerance = 0.1
	// pickerLatencyScale is the latency that scores 0.5. Redis on a LAN
	// answers in well under a millisecond, but a busy client host adds
	// milliseconds of scheduling to every call; at the Picker's default of
	// 1 ms, that noise would span the whole latency term.
	pickerLatencyScale = 5 * time.Millisecond
	// unhealthyFor is how long a failed call excludes a node; a successful
	// PING ends it earlier.
	unhealthyFor = time.Second
)

// WithRedisReplicas sets R, the number of Redis nodes that hold a copy of
// each hot key's value (default 3, at most the number of WithRedis
// addresses; 1 turns replication off). It applies only with several WithRedis
// addresses: each hot-key read then goes to the replica whose recent hit
// ratio, load, latency and freshness score best (router.Picker), and Set and
// Delete delete every replica. Cold keys stay on one node. Zero keeps the
// default.
func WithRedisReplicas(n int) Option {
	return func(o *options) {
		if n != 0 {
			o.redisReplicas = n
		}
	}
}

// replicas reads and writes hot keys on their R ring nodes. It is safe for
// concurrent use.
type replicas struct {
	n       int // R
	table   *router.Table
	picker  *router.Picker
	nodes   map[string]*redisNode // by node ID (its address, or its tag); read-only after newReplicas
	list    []*redisNode
	plain   redis.Cmdable // on a cluster: the untagged copy of record; else nil (the owner holds it)
	own     bool          // the nodes' clients are the replicas' own, closed with them
	prefix  string
	ttlBase time.Duration // WithRedisTTL
	timeout time.Duration

	lastRead atomic.Int64 // ns since epoch of the last get

	reads   *prometheus.CounterVec // by node and result
	repairs prometheus.Counter
}

// redisNode is one Redis server and what this instance measured of it since
// the sampler's last tick.
type redisNode struct {
	id   string
	rdb  redis.Cmdable // the server's client; on a cluster, the cluster's
	tag  string        // "" or, on a cluster, "{tag}": the copy's name is tag+prefix+key
	ping func(ctx context.Context) error
	pool float64 // pool size: the load of pool-size calls in flight is 1

	inflight  atomic.Int64 // calls in flight
	startSum  atomic.Int64 // sum of the in-flight calls' start times, ns since epoch
	gets      atomic.Int64 // GETs completed since the last tick
	hits      atomic.Int64 // of which found the key
	latSum    atomic.Int64 // their latencies, ns
	lastReply atomic.Int64 // ns since epoch of the last answer to any call

	lastHit float64 // hit ratio of the last interval with GETs; the sampler's own

	hitC, missC, errC prometheus.Counter // replica_reads_total{node=id}
}

// epoch is the origin of the in-flight start times, so that their sum fits
// an int64.
var epoch = time.Now()

// begin and end bracket every call to the node.
func (nd *redisNode) begin() time.Time {
	now := time.Now()
	nd.startSum.Add(int64(now.Sub(epoch)))
	nd.inflight.Add(1)
	return now
}

func (nd *redisNode) end(start time.Time, ok bool) time.Time {
	now := time.Now()
	nd.inflight.Add(-1)
	nd.startSum.Add(-int64(start.Sub(epoch)))
	if ok {
		nd.lastReply.Store(int64(now.Sub(epoch)))
	}
	return now
}

// newReplicas returns nil when replication is off: fewer than two addresses
// or masters (or a client of the caller's own that is not a cluster's), or
// R = 1. rdb is the Client's L2, log its logger.
func newReplicas(o options, dial func(ctx context.Context, network, addr string) (net.Conn, error), rdb redis.UniversalClient, log *slog.Logger) (*replicas, error) {
	if o.redisReplicas < 0 || o.redisReplicas > 16 {
		return nil, fmt.Errorf("hotcache: WithRedisReplicas: %d must be in [1, 16]", o.redisReplicas)
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return newClusterReplicas(o, cc, log)
	}
	addrs := slices.Compact(slices.Sorted(slices.Values(o.redisAddrs))) // the go-redis Ring keeps one shard per address too
	if o.redisClient != nil || min(o.redisReplicas, len(addrs)) < 2 {
		return nil, nil
	}
	r, err := newReplicaSet(o, addrs)
	if err != nil {
		return nil, err
	}
	r.own = true
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{
			Addr: a, DialTimeout: o.opTimeout, ReadTimeout: o.opTimeout,
			WriteTimeout: o.opTimeout, PoolTimeout: o.opTimeout, MaxRetries: -1,
			DialerRetries: 1,    // a node that refuses fails at once: the read moves on
			Dialer:        dial, // its failures log through the Client's logger (redislog.go); TLS too
			Username:      o.sec.redisUser, Password: o.sec.redisPassword,
		})
		r.addNode(a, rdb, "", func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, rdb.Options().PoolSize)
	}
	return r, nil
}

// newClusterReplicas spreads hot keys over the masters of cc by hash tags
// (rediscluster.go). Without a tag per master (the cluster unreachable when
// the Client starts), it logs why and turns replication off.
func newClusterReplicas(o options, cc *redis.ClusterClient, log *slog.Logger) (*replicas, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*o.opTimeout)
	defer cancel()
	tags, err := clusterTags(ctx, cc)
	if err != nil {
		log.Warn("hotcache: hot-key replicas off: the cluster's masters are unknown", "err", err)
		return nil, nil
	}
	if min(o.redisReplicas, len(tags)) < 2 {
		return nil, nil
	}
	r, err := newReplicaSet(o, tags)
	if err != nil {
		return nil, err
	}
	r.plain = cc
	for _, t := range tags {
		tag := "{" + t + "}"
		ping := func(ctx context.Context) error {
			m, err := cc.MasterForKey(ctx, tag)
			if err != nil {
				return err
			}
			return m.Ping(ctx).Err()
		}
		r.addNode(t, cc, tag, ping, cc.Options().PoolSize)
	}
	return r, nil
}

// newReplicaSet returns replicas over the nodes ids, without their clients
// (addNode).
func newReplicaSet(o options, ids []string) (*replicas, error) {
	n := min(o.redisReplicas, len(ids))
	// For addresses, the same ring (node ID = address, default virtual
	// nodes) as the go-redis Ring of cold keys, so a key's owner is the
	// node that holds its cold copy.
	table := router.NewTable(router.Config{})
	nodes := make([]router.Node, 0, len(ids))
	for _, id := range ids {
		nodes = append(nodes, router.Node{ID: id, Addr: id})
	}
	if err := table.Update(nodes); err != nil {
		return nil, fmt.Errorf("hotcache: Redis ring: %w", err)
	}
	picker, err := router.NewPicker(table, router.PickerConfig{
		Candidates: n, HalfLife: pickerHalfLife, UnhealthyFor: unhealthyFor, Tolerance: pickerTolerance,
		LatencyScale: pickerLatencyScale,
	})
	if err != nil {
		return nil, fmt.Errorf("hotcache: replica picker: %w", err)
	}
	f := promauto.With(o.reg)
	r := &replicas{
		n: n, table: table, picker: picker, nodes: map[string]*redisNode{},
		prefix: o.redisPrefix, ttlBase: o.redisTTL, timeout: o.opTimeout,
		reads: f.NewCounterVec(prometheus.CounterOpts{Namespace: "hotspot", Subsystem: "hotcache",
			Name: "replica_reads_total",
			Help: "GETs of hot keys on their Redis replicas, by node and result (hit, miss, error)."},
			[]string{"node", "result"}),
		repairs: f.NewCounter(prometheus.CounterOpts{Namespace: "hotspot", Subsystem: "hotcache",
			Name: "replica_repairs_total",
			Help: "Hot-key values copied from the owner to a replica that missed them."}),
	}
	return r, nil
}

// addNode adds the node id, whose copies are tag+prefix+key in rdb.
func (r *replicas) addNode(id string, rdb redis.Cmdable, tag string, ping func(context.Context) error, pool int) {
	nd := &redisNode{id: id, rdb: rdb, tag: tag, ping: ping, pool: float64(pool), lastHit: 1,
		hitC: r.reads.WithLabelValues(id, "hit"), missC: r.reads.WithLabelValues(id, "miss"),
		errC: r.reads.WithLabelValues(id, "error")}
	nd.lastReply.Store(int64(time.Since(epoch)))
	r.nodes[id] = nd
	r.list = append(r.list, nd)
}

// get reads a hot key from the replica the Picker chooses. A miss returns
// an error wrapping redis.Nil.
func (r *replicas) get(ctx context.Context, key string) ([]byte, error) {
	if now := int64(time.Since(epoch)); now-r.lastRead.Load() > int64(sampleEvery/10) {
		r.lastRead.Store(now) // rarely: the line is shared by every reader
	}
	var buf [16]router.Node
	cands := r.table.Ring().LookupN(key, r.n, buf[:0])
	node, err := r.pick(key, cands)
	if err != nil {
		return nil, err
	}
	data, err := r.read(ctx, node, key)
	if wrongType(err) {
		return nil, err // the node answered
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		r.picker.MarkUnhealthy(node)
		next, perr := r.pick(key, cands) // the best of the others
		if perr != nil || next == node {
			return nil, err
		}
		node = next
		data, err = r.read(ctx, node, key)
		if err != nil && !errors.Is(err, redis.Nil) {
			r.picker.MarkUnhealthy(node)
			return nil, err
		}
	}
	owner := cands[0].ID
	if err == nil || (node == owner && r.plain == nil) {
		return data, err
	}
	// A replica without the value: the owner holds the copy of record.
	data, err = r.record(ctx, owner, key)
	if err != nil {
		return nil, err
	}
	if err := r.set(ctx, node, key, data, r.ttl()); err == nil {
		r.repairs.Inc()
	}
	return data, nil
}

// record reads the copy of record of key: the untagged key on a cluster,
// else the copy on owner.
func (r *replicas) record(ctx context.Context, owner, key string) ([]byte, error) {
	if r.plain != nil {
		data, err := r.plain.Get(ctx, r.prefix+key).Bytes()
		if err != nil && !errors.Is(err, redis.Nil) {
			err = fmt.Errorf("redis get %q: %w", key, err)
		}
		return data, err
	}
	data, err := r.read(ctx, owner, key)
	if err != nil && !errors.Is(err, redis.Nil) {
		r.picker.MarkUnhealthy(owner)
	}
	return data, err
}

// pick returns the ID of the replica of key to read. It never goes past the
// R replicas: a node further along the ring holds no copy that invalidation
// would delete.
func (r *replicas) pick(key string, cands []router.Node) (string, error) {
	n, ok := r.picker.Pick(key)
	if ok {
		for _, c := range cands {
			if c.ID == n.ID {
				return n.ID, nil
			}
		}
	}
	return "", fmt.Errorf("every Redis replica of %q failed in the last %v", key, unhealthyFor)
}

// read GETs key on node, measured.
func (r *replicas) read(ctx context.Context, id, key string) ([]byte, error) {
	nd := r.nodes[id]
	start := nd.begin()
	data, err := nd.rdb.Get(ctx, nd.tag+r.prefix+key).Bytes()
	ok := err == nil || errors.Is(err, redis.Nil)
	end := nd.end(start, ok)
	switch {
	case err == nil:
		nd.hits.Add(1)
		nd.hitC.Inc()
	case ok:
		nd.missC.Inc()
	default:
		nd.errC.Inc()
		return nil, fmt.Errorf("redis get %q on %s: %w", key, id, err)
	}
	nd.latSum.Add(int64(end.Sub(start)))
	nd.gets.Add(1)
	return data, err
}

// ttl is the TTL of a copy: the write-back TTL plus up to 10% jitter.
func (r *replicas) ttl() time.Duration { return r.ttlBase + rand.N(r.ttlBase/10+1) }

func (r *replicas) set(ctx context.Context, id, key string, data []byte, ttl time.Duration) error {
	nd := r.nodes[id]
	start := nd.begin()
	err := nd.rdb.Set(ctx, nd.tag+r.prefix+key, data, ttl).Err()
	nd.end(start, err == nil)
	if err != nil {
		return fmt.Errorf("redis set %q on %s: %w", key, id, err)
	}
	return nil
}

// each runs fn on every replica of key at once and joins the errors.
func (r *replicas) each(key string, fn func(id string) error) error {
	var buf [16]router.Node
	cands := r.table.Ring().LookupN(key, r.n, buf[:0])
	errs := make([]error, len(cands))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Go(func() { errs[i] = fn(c.ID) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// setAll writes key's value to all of its replicas (and, on a cluster, the
// copy of record). It fails only if no replica took it: a copy that is
// missing is repaired by a later read.
func (r *replicas) setAll(ctx context.Context, key string, data []byte, ttl time.Duration) error {
	if r.plain != nil {
		_ = r.plain.Set(ctx, r.prefix+key, data, ttl).Err() // for the cold reads once it cools
	}
	var ok atomic.Bool
	err := r.each(key, func(id string) error {
		if err := r.set(ctx, id, key, data, ttl); err != nil {
			r.picker.MarkUnhealthy(id)
			return err
		}
		ok.Store(true)
		return nil
	})
	if ok.Load() {
		return nil
	}
	return err
}

// delAll deletes key from all of its replicas.
func (r *replicas) delAll(ctx context.Context, key string) error {
	return r.del(ctx, key, true)
}

// delCopies deletes key's copies but not its copy of record (the owner's,
// or on a cluster the untagged key, which delAll leaves alone too): after a
// write that has just set the copy of record.
func (r *replicas) delCopies(ctx context.Context, key string) error {
	return r.del(ctx, key, r.plain != nil)
}

// del deletes key from its replicas, from the first (the owner) only if
// withOwner.
func (r *replicas) del(ctx context.Context, key string, withOwner bool) error {
	var buf [16]router.Node
	owner := r.table.Ring().LookupN(key, 1, buf[:0])[0].ID
	return r.each(key, func(id string) error {
		if id == owner && !withOwner {
			return nil
		}
		nd := r.nodes[id]
		start := nd.begin()
		err := nd.rdb.Del(ctx, nd.tag+r.prefix+key).Err()
		nd.end(start, err == nil)
		if err != nil {
			r.picker.MarkUnhealthy(id)
			return fmt.Errorf("redis del %q on %s: %w", key, id, err)
		}
		return nil
	})
}

// sample feeds the Picker one Sample of nd every sampleEvery while hot keys
// are read from Redis (see sampleFor), until ctx ends.
func (r *replicas) sample(ctx context.Context, nd *redisNode) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(epoch)-time.Duration(r.lastRead.Load()) > sampleFor {
			continue
		}
		if s, ok := r.measure(ctx, nd); ok {
			r.picker.Observe(nd.id, s)
		}
	}
}

// measure sums up nd's calls since the last call of measure; without any,
// it PINGs nd. It returns false when the PING fails (nd is then unhealthy).
func (r *replicas) measure(ctx context.Context, nd *redisNode) (router.Sample, bool) {
	gets, hits, latSum := nd.gets.Swap(0), nd.hits.Swap(0), nd.latSum.Swap(0)
	now := time.Since(epoch)
	inflight, startSum := nd.inflight.Load(), nd.startSum.Load()
	if gets > 0 {
		nd.lastHit = float64(hits) / float64(gets)
	} else {
		// A miss on a replica repairs it, so misses say little about the
		// next read; and a node nobody reads would otherwise keep a bad
		// ratio, and be left, for ever. Without GETs the ratio halves its
		// distance to 1 every interval.
		nd.lastHit += (1 - nd.lastHit) / 2
	}
	s := router.Sample{
		HitRatio:  nd.lastHit,
		Load:      float64(inflight) / nd.pool,
		Staleness: max(now-time.Duration(nd.lastReply.Load()), 0),
	}
	if gets > 0 {
		s.Latency = time.Duration(latSum / gets)
	}
	if inflight > 0 && startSum > 0 {
		// The calls not answered yet count with their mean age so far. The
		// two loads are not one snapshot: calls that begin or end between
		// them skew the mean, so it is kept within what a call can last.
		age := min(max(now-time.Duration(startSum/inflight), 0), 3*r.timeout)
		s.Latency = max(s.Latency, age)
	}
	if gets > 0 || inflight > 0 {
		return s, true
	}
	pctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	start := nd.begin()
	err := nd.ping(pctx)
	end := nd.end(start, err == nil)
	if err != nil {
		if ctx.Err() == nil {
			r.picker.MarkUnhealthy(nd.id)
		}
		return s, false
	}
	r.picker.MarkHealthy(nd.id)
	s.Latency = end.Sub(start)
	return s, true
}

func (r *replicas) close() error {
	if !r.own {
		return nil // the cluster's client is the Client's L2
	}
	var errs []error
	for _, nd := range r.list {
		if err := nd.rdb.(*redis.Client).Close(); err != nil {
			errs = append(errs, fmt.Errorf("hotcache: close Redis %s: %w", nd.id, err))
		}
	}
	return errors.Join(errs...)
}
