package hotcache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Bulk invalidation: every key under a prefix, for migrations.
//
// InvalidatePrefix drops the prefix from this instance's memory, then walks
// every Redis server with SCAN MATCH (batches of bulkBatch), deleting what it
// finds within a token bucket of keys per second (WithBulkLimit, default
// 10,000/s) so a migration does not starve live traffic, then broadcasts the
// prefix on the app's prefix channel; every instance drops its L1 and
// fallback copies of keys under the prefix. The broadcast is repeated after
// DoubleDeleteDelay. A prefix whose walk fails is queued and walked again
// like a failed key invalidation (pending.go), and this instance reads keys
// under it from the Loader only until then.

const bulkBatch = 500

// WithBulkLimit sets how many Redis keys per second InvalidatePrefix deletes
// at most (default 10,000/s; NoLimit: as fast as Redis answers).
func WithBulkLimit(keys Rate) Option { return func(o *options) { o.bulkRate = keys } }

// InvalidatePrefix drops every key that starts with prefix from Redis and
// from every instance's L1, without touching the source of truth, and
// returns how many Redis keys it deleted. prefix must not be empty. Errors
// wrap ErrNotInvalidated as for Set; the walk is then retried in the
// background.
func (c *Client) InvalidatePrefix(ctx context.Context, prefix string) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if prefix == "" {
		return 0, errors.New("hotcache: InvalidatePrefix: empty prefix (would drop the whole cache)")
	}
	it := pendingItem{s: prefix, prefix: true}
	var seq uint64
	queued := false
	if c.rdb != nil {
		seq, queued = c.pending.mark(it)
	}
	c.dropLocalPrefix(prefix)
	if c.rdb == nil {
		return 0, nil
	}
	n, err := c.deletePrefix(ctx, prefix)
	c.dropLocalPrefix(prefix)
	if err == nil {
		c.pending.done(it, seq)
		c.secondDelete(it)
		return n, nil
	}
	// Also when the caller gave up: the walk is retried in the background.
	return n, c.notInvalidated(it, queued, err)
}

// deletePrefix deletes every Redis key under prefix on every server, then
// broadcasts the prefix.
func (c *Client) deletePrefix(ctx context.Context, prefix string) (int, error) {
	ctx = c.redisCtx(ctx)
	pattern := globEscape(c.o.redisPrefix+prefix) + "*"
	var total atomic.Int64 // Ring and Cluster walk their servers in parallel
	walk := func(ctx context.Context, shard *redis.Client) error {
		return c.unlinkMatching(ctx, shard, pattern, prefix, &total)
	}
	var err error
	switch r := c.rdb.(type) {
	case *redis.Client:
		err = walk(ctx, r)
	case *redis.Ring:
		err = r.ForEachShard(ctx, walk)
	case *redis.ClusterClient:
		// The untagged keys and the hot keys' copies (rediscluster.go).
		tagged := "{" + replicaTagPrefix + "*}" + pattern
		err = r.ForEachMaster(ctx, func(ctx context.Context, shard *redis.Client) error {
			return errors.Join(walk(ctx, shard), c.unlinkMatching(ctx, shard, tagged, prefix, &total))
		})
	default:
		err = fmt.Errorf("hotcache: InvalidatePrefix: unsupported Redis client %T", c.rdb)
	}
	if err != nil {
		return int(total.Load()), err
	}
	return int(total.Load()), c.publish(ctx, c.prefixChannel, prefix)
}

// unlinkMatching unlinks the keys of shard that match pattern, within the
// bulk limit, and adds their number to total. Each key is a command of its
// own, pipelined: on a cluster node, one UNLINK of keys in several slots
// fails (CROSSSLOT).
func (c *Client) unlinkMatching(ctx context.Context, shard *redis.Client, pattern, prefix string, total *atomic.Int64) error {
	var cursor uint64
	for {
		keys, next, err := shard.Scan(ctx, cursor, pattern, bulkBatch).Result()
		if err != nil {
			return fmt.Errorf("%w: redis scan %q: %w", ErrUnavailable, pattern, err)
		}
		for len(keys) > 0 {
			n := min(len(keys), c.bulkLim.Burst())
			if err := c.bulkLim.WaitN(ctx, n); err != nil {
				return fmt.Errorf("hotcache: invalidate prefix %q: %w", prefix, err)
			}
			_, err := shard.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range keys[:n] {
					p.Unlink(ctx, k)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%w: redis unlink: %w", ErrUnavailable, err)
			}
			total.Add(int64(n))
			keys = keys[n:]
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// globEscape escapes the characters SCAN MATCH treats as a pattern.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// dropLocalPrefix drops every key under prefix from this instance's memory:
// hot values (reloaded at once), protected values, and the whole fallback
// cache (ristretto cannot list its keys; it only holds what may be lost).
func (c *Client) dropLocalPrefix(prefix string) {
	c.invSeq.Add(1)
	c.clearRecent()
	c.guard.dropPrefix(prefix)
	for k := range c.hot.Load().m {
		if strings.HasPrefix(k, prefix) {
			c.dropLocal(k)
		}
	}
}

// clearRecent empties the fallback cache; ristretto's Clear must not run twice at once.
func (c *Client) clearRecent() {
	c.clearMu.Lock()
	defer c.clearMu.Unlock()
	c.recent.Clear()
}
