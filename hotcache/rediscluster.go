package hotcache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Redis Cluster and Sentinel.
//
// On a Redis Cluster a key lives on the master that owns its hash slot, and
// a hot key melts that one master. The Client reaches the cluster through
// go-redis's ClusterClient, which follows MOVED and ASK redirections, and
// with reloadOnFailure (below) reloads its slot table soon after a master's
// death too. Cold keys are read and written under their own names, so apps
// that share the cluster without hotcache see the same keys.
//
// Hot-key replicas (replicas.go) need copies on distinct masters, but a key
// name has one slot. Each copy is therefore stored under a hash tag: copy
// "{hotspot-r7}"+key lives in the slot of "hotspot-r7". When the Client
// starts, it picks for every master the first tag "hotspot-rN" (N < 1024)
// whose slot that master owns (CLUSTER KEYSLOT and CLUSTER SLOTS); a hot
// key's R copies go to R of those tags in ring order, so to R distinct
// masters, and the untagged key stays the copy of record that cold reads
// and writes use. The tags are fixed for the Client's life: invalidation
// deletes the same names it wrote. A failover keeps slots together, so the
// copies stay on distinct masters; a reshard that moves a tag's slot onto a
// master that holds another tag leaves two copies on one master (correct,
// only less spread) until the instances restart.
//
// Invalidation is broadcast with PUBLISH, which Redis Cluster forwards to
// every node over its bus, so a subscriber on any node hears it. Warm
// pipelines by slot; InvalidatePrefix walks every master with SCAN, for the
// untagged keys and for the tagged copies.
//
// Behind Sentinel, go-redis's failover client asks the sentinels for the
// current primary and moves to the new one after a failover; there is one
// primary, so there are no replicas to spread hot keys over.

const (
	// replicaTagPrefix starts every hot-key copy's hash tag.
	replicaTagPrefix = "hotspot-r"
	// replicaTagCandidates is how many tags are tried to find one per
	// master: with M masters owning equal slot ranges, a master is missed
	// with probability (1-1/M)^1024 (under 1e-4 for M = 100).
	replicaTagCandidates = 1024
)

// WithRedisCluster uses a Redis Cluster as the shared cache (L2), reached at
// any of addrs (seed nodes; the rest is discovered). The Client's timeouts,
// credentials (WithRedisAuth) and TLS (WithRedisTLS) apply to every node. Hot
// keys get copies on WithRedisReplicas distinct masters (default 3, at most
// the number of masters), under hash tags "{hotspot-rN}" + key. A
// ClusterClient of the caller's own (WithRedisClient) gets the same copies.
func WithRedisCluster(addrs ...string) Option {
	return func(o *options) { o.redisCluster = addrs }
}

// WithRedisSentinel uses the Redis primary that the sentinels at addrs know
// as master, and follows it across failovers. The Client's timeouts,
// credentials (WithRedisAuth, for the primary and its replicas, not the
// sentinels) and TLS (WithRedisTLS, for all of them) apply.
func WithRedisSentinel(master string, addrs ...string) Option {
	return func(o *options) {
		o.redisMaster = master
		o.redisSentinels = addrs
	}
}

// validateRedis checks that at most one way to reach Redis was given.
func (o *options) validateRedis() error {
	n := 0
	for _, set := range []bool{len(o.redisAddrs) > 0, o.redisClient != nil, len(o.redisCluster) > 0,
		len(o.redisSentinels) > 0 || o.redisMaster != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("hotcache: WithRedis, WithRedisClient, WithRedisCluster and WithRedisSentinel are exclusive")
	}
	if (len(o.redisSentinels) > 0) != (o.redisMaster != "") {
		return fmt.Errorf("hotcache: WithRedisSentinel needs a master name and at least one sentinel address")
	}
	return nil
}

// newRedisCluster and newRedisSentinel give the cluster and the failover
// client the options of a single-server client (newRedis).
func newRedisCluster(o options, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: o.redisCluster, Dialer: dial, DialTimeout: o.opTimeout, ReadTimeout: o.opTimeout,
		WriteTimeout: o.opTimeout, PoolTimeout: o.opTimeout, MaxRetries: -1,
		Username: o.sec.redisUser, Password: o.sec.redisPassword, // TLS: redisDialer
	})
}

// reloadOnFailure asks a ClusterClient to reload its slot table after any
// call that failed without a reply from Redis. go-redis reloads it on MOVED
// and ASK, and otherwise every ClusterStateReloadInterval (60 s): after a
// master's death its calls go on failing against the dead address, though
// its replica took over within a second or two, since nothing answers to
// redirect them. go-redis runs at most one reload at a time, 200 ms apart.
// The Client adds the hook to every ClusterClient it uses, one given to
// WithRedisClient too.
type reloadOnFailure struct{ cc *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) check(ctx context.Context, err error) {
	var reply redis.Error // Nil and the server's error replies: Redis answered
	if err != nil && !errors.As(err, &reply) {
		h.cc.ReloadState(ctx)
	}
}

func newRedisSentinel(o options, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *redis.Client {
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: o.redisMaster, SentinelAddrs: o.redisSentinels,
		Dialer: dial, DialTimeout: o.opTimeout, ReadTimeout: o.opTimeout,
		WriteTimeout: o.opTimeout, PoolTimeout: o.opTimeout, MaxRetries: -1,
		Username: o.sec.redisUser, Password: o.sec.redisPassword, // TLS: redisDialer
	})
}

// clusterTags returns one hash tag per master of cc, in the order of the
// masters' first slots, each tag's slot owned by its master.
func clusterTags(ctx context.Context, cc *redis.ClusterClient) ([]string, error) {
	//lint:ignore SA1019 CLUSTER SLOTS, unlike CLUSTER SHARDS, works before Redis 7 too
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("cluster slots: %w", err)
	}
	slices.SortFunc(ranges, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
	owner := make(map[string][]redis.ClusterSlot) // master address -> its ranges
	var masters []string
	for _, r := range ranges {
		if len(r.Nodes) == 0 {
			continue
		}
		m := r.Nodes[0].Addr
		if owner[m] == nil {
			masters = append(masters, m)
		}
		owner[m] = append(owner[m], r)
	}
	pipe := cc.Pipeline()
	cmds := make([]*redis.IntCmd, replicaTagCandidates)
	for i := range cmds {
		cmds[i] = pipe.ClusterKeySlot(ctx, replicaTagPrefix+strconv.Itoa(i))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("cluster keyslot: %w", err)
	}
	var tags []string
	for _, m := range masters {
		for i, cmd := range cmds {
			s := int(cmd.Val())
			if slices.ContainsFunc(owner[m], func(r redis.ClusterSlot) bool { return r.Start <= s && s <= r.End }) {
				tags = append(tags, replicaTagPrefix+strconv.Itoa(i))
				break
			}
		}
	}
	return tags, nil
}
