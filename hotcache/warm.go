package hotcache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/hotspot-dev/hotspot/hotspotapi"
)

// Warm-up.
//
// Warm fills Redis before (or while) traffic arrives, so a new deployment
// does not send every first read to the source of truth. It works through
// the keys in batches of warmBatch: one pipelined EXISTS per batch, then the
// missing keys are loaded by up to warmWorkers Loader calls at a time and
// written back in one pipeline, with the usual TTL and jitter; a pipeline
// that fails is tried up to warmAttempts times. Each Loader
// call takes a token from the Client's Loader bucket, the same one live
// misses take from, so live reads and Warm together never call the Loader
// faster than WithLoaderLimit; Warm also takes one from its own bucket
// (WithWarmLimit, default half the Loader limit) so that live traffic keeps
// the rest. Keys that are hot in this instance and have no value yet are
// then loaded into L1 from Redis.
//
// A write that happens while Warm loads a key can be overwritten by Warm's
// older value in Redis; the second delete of the write (DoubleDeleteDelay)
// removes it, as for a live read's write-back.

const (
	warmBatch    = 100
	warmWorkers  = 8
	warmAttempts = 3
)

// WithWarmLimit sets how many Loader calls per second Warm makes at most
// (default half the Loader limit; NoLimit: only the Loader limit applies).
// Warm's calls also count against the Loader limit.
func WithWarmLimit(r Rate) Option {
	return func(o *options) {
		o.warmRate = r
		o.warmSet = true
	}
}

// WarmStats counts what Warm did with its keys.
type WarmStats struct {
	Present  int // already in Redis: left alone
	Loaded   int // read from the Loader and written to Redis
	NotFound int // the Loader has no such key
	Failed   int // the Loader failed
}

// Warm loads keys that are missing from Redis from the Loader and writes them
// to Redis, and loads the hot ones among them into L1. It returns when every
// key was handled, or with ctx's error; a Loader failure is counted, not
// returned, and a Redis failure ends Warm with an error wrapping
// ErrUnavailable. Warm needs Redis and a Loader.
func (c *Client) Warm(ctx context.Context, keys []string) (WarmStats, error) {
	var st WarmStats
	if c.closed.Load() {
		return st, ErrClosed
	}
	if c.rdb == nil || c.o.loader == nil {
		return st, errors.New("hotcache: Warm needs Redis and a Loader")
	}
	ctx = c.redisCtx(ctx)
	for len(keys) > 0 {
		batch := keys[:min(len(keys), warmBatch)]
		keys = keys[len(batch):]
		if err := c.warmBatch(ctx, batch, &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// warmBatch warms one batch of keys: those Redis lacks are loaded and
// written to Redis, and the hot ones among the batch are loaded into L1.
func (c *Client) warmBatch(ctx context.Context, batch []string, st *WarmStats) error {
	exists, err := c.warmExisting(ctx, batch)
	if err != nil {
		return err
	}
	missing := 0
	for i := range batch {
		if exists[i] {
			st.Present++
		} else {
			missing++
		}
	}
	if err := c.warmTokens(ctx, missing); err != nil {
		return err
	}
	results, notFound, failed := c.warmLoad(ctx, batch, exists)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hotcache: warm: %w", err)
	}
	st.NotFound += notFound
	st.Failed += failed
	n, err := c.warmStore(ctx, results)
	if err != nil {
		return err
	}
	st.Loaded += n
	t := c.hot.Load()
	for _, k := range batch {
		if e := t.m[k]; e != nil && e.val.Load() == nil {
			c.enqueue(e)
		}
	}
	return nil
}

// warmExisting reports which keys of batch Redis already holds, with one
// pipelined EXISTS.
func (c *Client) warmExisting(ctx context.Context, batch []string) ([]bool, error) {
	cmds, err := c.warmPipeline(ctx, func(ctx context.Context, p redis.Pipeliner) {
		for _, k := range batch {
			p.Exists(ctx, c.o.redisPrefix+k)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%w: warm: redis exists: %w", ErrUnavailable, err)
	}
	exists := make([]bool, len(batch))
	for i, cmd := range cmds {
		if ic, ok := cmd.(*redis.IntCmd); ok {
			exists[i] = ic.Val() > 0
		}
	}
	return exists, nil
}

// warmTokens takes n Loader calls' tokens from Warm's bucket and the
// Loader's, for the whole batch at once (in chunks of the buckets' bursts):
// waiting per key would oversleep on a busy machine.
func (c *Client) warmTokens(ctx context.Context, n int) error {
	for n > 0 {
		k := min(n, c.warmLim.Burst(), c.loadLim.Burst())
		if err := c.warmLim.WaitN(ctx, k); err != nil {
			return fmt.Errorf("hotcache: warm: %w", err)
		}
		if err := c.loadLim.WaitN(ctx, k); err != nil {
			return fmt.Errorf("hotcache: warm: %w", err)
		}
		n -= k
	}
	return nil
}

// warmed is a value Warm loaded for key.
type warmed struct {
	key  string
	data []byte
}

// warmLoad calls the Loader, up to warmWorkers at a time, for every key of
// batch that Redis lacks. results has the value of each key the Loader
// found at its index in batch, nil elsewhere; notFound and failed count the
// keys the Loader does not have and those it failed on.
func (c *Client) warmLoad(ctx context.Context, batch []string, exists []bool) (results []*warmed, notFound, failed int) {
	results = make([]*warmed, len(batch))
	var mu sync.Mutex // guards results, notFound and failed
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(warmWorkers)
	for i, k := range batch {
		if exists[i] {
			continue
		}
		g.Go(func() error {
			lctx, cancel := context.WithTimeout(gctx, c.o.opTimeout)
			defer cancel()
			data, err := c.o.loader.Load(lctx, k)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, ErrNotFound):
				c.m.loads.WithLabelValues("notfound").Inc()
				notFound++
			case err != nil:
				c.log.Debug("hotcache: warm: load failed", "key", k, "err", err)
				failed++
			default:
				c.m.loads.WithLabelValues("loader").Inc()
				results[i] = &warmed{key: k, data: data}
			}
			return nil
		})
	}
	_ = g.Wait()
	return results, notFound, failed
}

// warmStore writes the loaded values to Redis in one pipeline, each with
// the TTL and its jitter, and returns how many it wrote.
func (c *Client) warmStore(ctx context.Context, results []*warmed) (int, error) {
	n := 0
	for _, r := range results {
		if r != nil {
			n++
		}
	}
	_, err := c.warmPipeline(ctx, func(ctx context.Context, p redis.Pipeliner) {
		for _, r := range results {
			if r != nil {
				ttl := c.o.redisTTL + rand.N(c.o.redisTTL/10+1)
				p.Set(ctx, c.o.redisPrefix+r.key, r.data, ttl)
			}
		}
	})
	if err != nil {
		return 0, fmt.Errorf("%w: warm: redis set: %w", ErrUnavailable, err)
	}
	return n, nil
}

// warmPipeline runs one pipeline of Warm's, trying up to warmAttempts times
// (100 ms, then 200 ms apart): one slow Redis answer should not end a long
// warm-up whose loads are already paid for.
func (c *Client) warmPipeline(ctx context.Context, fill func(ctx context.Context, p redis.Pipeliner)) ([]redis.Cmder, error) {
	var err error
	for attempt := range warmAttempts {
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		pctx, cancel := context.WithTimeout(ctx, c.o.opTimeout)
		var cmds []redis.Cmder
		cmds, err = c.rdb.Pipelined(pctx, func(p redis.Pipeliner) error {
			fill(pctx, p)
			return nil
		})
		cancel()
		if err == nil {
			return cmds, nil
		}
		c.log.Debug("hotcache: warm: Redis pipeline failed", "attempt", attempt+1, "err", err)
	}
	return nil, err
}

// newWarmLimiter returns Warm's own bucket.
func newWarmLimiter(o options) *rate.Limiter {
	r := o.warmRate
	if !o.warmSet {
		r = o.loaderRate / 2
		if o.loaderRate >= NoLimit {
			r = NoLimit
		}
	}
	return rate.NewLimiter(r.limit(), min(r.burst(), warmBatch))
}

// TopKeys asks hotspotd at addr ("host:port" or a URL) for app's n busiest
// keys, hot or not (GET /v1/top; n from 1 to 1000), busiest first: a key
// list for Warm.
func TopKeys(ctx context.Context, addr, app string, n int) ([]string, error) {
	if n < 1 || n > hotspotapi.MaxTopN {
		return nil, fmt.Errorf("hotcache: TopKeys: n = %d, want 1 to %d", n, hotspotapi.MaxTopN)
	}
	c, err := hotspotapi.NewClient(addr, hotspotapi.ClientConfig{})
	if err != nil {
		return nil, fmt.Errorf("hotcache: TopKeys: %w", err)
	}
	top, err := c.Top(ctx, app, n)
	if err != nil {
		return nil, fmt.Errorf("hotcache: TopKeys: %w", err)
	}
	keys := make([]string, 0, len(top.Keys))
	for _, k := range top.Keys {
		keys = append(keys, k.Key)
	}
	return keys, nil
}
