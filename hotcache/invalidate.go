package hotcache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Writes and invalidation.
//
// Set and Delete change the source of truth through the Loader's Writer, then
// delete the key from Redis and broadcast an invalidation on the app's Pub/Sub
// channel; every instance (this one at once) drops the key from its L1 and
// reloads it if it is hot. After DoubleDeleteDelay they delete and broadcast
// once more: a reader that fetched the old value just before the write and
// wrote it back to Redis (or into an L1) after the first delete is undone by
// the second.
//
// Bound: while Redis answers, every instance drops the key within the
// broadcast latency (about a millisecond on one network) after Set returns,
// and drops any old value read back in the race window at DoubleDeleteDelay
// plus that latency. While Redis does not answer, Set returns an error
// wrapping ErrNotInvalidated and the invalidation is retried every 100 ms
// (pending.go): it lands within 100 ms plus one Redis round trip of Redis
// answering again, and until then the writing instance reads the key from
// the Loader only. An instance whose Pub/Sub connection was lost marks every
// hot value stale when it resubscribes (within 250 ms of Redis answering),
// and in any case a hot value is never served older than the L1 TTL unless
// every reload fails.

// Set writes value for key through the Loader's Writer and invalidates key in
// Redis and in every instance's L1. It reports one write of len(value) bytes
// of key to Hotspot (also when the write fails: it reached the source).
//
// A failed write returns an error wrapping ErrWriteFailed and changes
// nothing. A write that landed but could not be invalidated (Redis down)
// returns an error wrapping ErrNotInvalidated and ErrUnavailable: the
// invalidation is retried every 100 ms and reaches every instance within
// 100 ms plus a Redis round trip of Redis answering again (unless the retry
// queue, WithInvalidationQueue, was full; the error then says so). Until it
// lands, this instance serves key from the Loader, never from Redis; other
// instances may serve the old value until then.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	if c.closed.Load() {
		return ErrClosed
	}
	w, ok := c.o.loader.(Writer)
	if !ok {
		return errors.New("hotcache: Set needs a Loader that implements Writer")
	}
	err := w.Write(ctx, key, value)
	c.countWrite(key, len(value)) // it reached the source, landed or not
	if err != nil {
		return fmt.Errorf("%w: set %q: %w", ErrWriteFailed, key, err)
	}
	if c.bloom != nil {
		c.bloom.Add(key)
	}
	return c.invalidate(ctx, key)
}

// Delete deletes key through the Loader's Writer, if the Loader is one, and
// invalidates key in Redis and in every instance's L1. Without a Writer it
// only invalidates; to invalidate without touching the source of truth when
// the Loader is a Writer, use Invalidate. It reports one write of key (of 0
// bytes) to Hotspot. Errors are those of Set.
func (c *Client) Delete(ctx context.Context, key string) error {
	if c.closed.Load() {
		return ErrClosed
	}
	c.countWrite(key, 0)
	if w, ok := c.o.loader.(Writer); ok {
		if err := w.Delete(ctx, key); err != nil {
			return fmt.Errorf("%w: delete %q: %w", ErrWriteFailed, key, err)
		}
	}
	return c.invalidate(ctx, key)
}

// Invalidate drops key from Redis and from every instance's L1 without
// touching the source of truth: the next read loads it again. Use it after
// changing the source some other way. Its errors and bound are those of Set.
func (c *Client) Invalidate(ctx context.Context, key string) error {
	if c.closed.Load() {
		return ErrClosed
	}
	return c.invalidate(ctx, key)
}

func (c *Client) invalidate(ctx context.Context, key string) error {
	it := pendingItem{s: key}
	var seq uint64
	queued := false
	if c.rdb != nil {
		// Marked before anything is dropped: from here on this instance
		// does not read key from Redis until the DEL has landed.
		seq, queued = c.pending.mark(it)
	}
	c.dropLocal(key)
	if c.rdb == nil {
		return nil
	}
	err := c.delAndPublish(ctx, key)
	// Again: a reload started by the first drop may have read Redis before
	// the DEL. (The instance also receives its own broadcast.)
	c.dropLocal(key)
	if err == nil {
		c.pending.done(it, seq)
		c.secondDelete(it)
		return nil
	}
	return c.notInvalidated(it, queued, err)
}

// notInvalidated hands a failed invalidation to the retrier, or counts it
// dropped when the queue was full, and returns the error for the caller.
func (c *Client) notInvalidated(it pendingItem, queued bool, err error) error {
	what := "key"
	if it.prefix {
		what = "prefix"
	}
	if !queued {
		c.m.pendingDropped.Inc()
		c.log.Warn("hotcache: invalidation dropped: retry queue full", what, it.s, "err", err)
		return fmt.Errorf("%w: %s %q: retry queue full, not retried: %w", ErrNotInvalidated, what, it.s, err)
	}
	c.pending.failed(it)
	return fmt.Errorf("%w: %s %q: retrying in the background: %w", ErrNotInvalidated, what, it.s, err)
}

// secondDelete deletes and broadcasts it again after DoubleDeleteDelay (a
// prefix: broadcasts again). A failure queues it for the retrier.
func (c *Client) secondDelete(it pendingItem) {
	c.spawn(func() {
		t := time.NewTimer(c.o.doubleDelete)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.bg.Done(): // closing: do it now rather than never
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.bg), c.o.opTimeout)
		defer cancel()
		var err error
		if it.prefix {
			err = c.publish(ctx, c.prefixChannel, it.s)
		} else {
			err = c.delAndPublishKey(ctx, it.s)
		}
		if err != nil {
			c.log.Warn("hotcache: second delete failed; retrying", "item", it.s, "err", err)
			if _, ok := c.pending.mark(it); ok {
				c.pending.failed(it)
			} else {
				c.m.pendingDropped.Inc()
			}
		}
	})
}

// delAndPublish deletes key in Redis and broadcasts its invalidation,
// through the circuit breaker.
func (c *Client) delAndPublish(ctx context.Context, key string) error {
	if !c.br.allow() {
		return errBreakerOpen
	}
	err := c.delAndPublishKey(ctx, key)
	if err != nil && !errors.Is(err, errReplicaDown) {
		c.br.failure()
		return err
	}
	c.br.success()
	return err
}

// errReplicaDown marks an invalidation that reached the key's owner and the
// broadcast but not every replica: one node's failure, not Redis's as a
// whole, so it does not trip the breaker (it is still retried).
var errReplicaDown = errors.New("hotcache: a replica did not answer")

// delAndPublishKey deletes key in Redis, on its owner and on every replica
// that may hold a copy, and broadcasts its invalidation, past the breaker
// (the retrier and second deletes are one caller each).
func (c *Client) delAndPublishKey(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(c.redisCtx(ctx), c.o.opTimeout)
	defer cancel()
	repErr := make(chan error, 1)
	if c.rep != nil {
		// Every replica, whether or not the key is hot here, at the same
		// time as the owner and before the broadcast.
		go func() { repErr <- c.rep.delAll(ctx, key) }()
	} else {
		repErr <- nil
	}
	err := c.rdb.Del(ctx, c.o.redisPrefix+key).Err()
	// The broadcast waits for the replicas: an instance that reloads key
	// on hearing it must not find an old copy there.
	rerr := <-repErr
	if err != nil {
		err = fmt.Errorf("%w: redis del: %w", ErrUnavailable, err)
	} else {
		err = c.publish(ctx, c.channel, key)
	}
	switch {
	case rerr == nil:
		return err
	case err == nil:
		return fmt.Errorf("%w: %w: %w", ErrUnavailable, errReplicaDown, rerr)
	default: // the owner's failure is the one that counts; name the replicas too
		return fmt.Errorf("%w (replicas: %v)", err, rerr)
	}
}

func (c *Client) publish(ctx context.Context, channel, msg string) error {
	ctx, cancel := context.WithTimeout(c.redisCtx(ctx), c.o.opTimeout)
	defer cancel()
	if err := c.rdb.Publish(ctx, channel, msg).Err(); err != nil {
		return fmt.Errorf("%w: redis publish: %w", ErrUnavailable, err)
	}
	c.m.invalidations.WithLabelValues("sent").Inc()
	return nil
}

// subscribe receives invalidations until Close. A resubscription means
// broadcasts may have been missed, so every hot value is marked stale.
func (c *Client) subscribe() {
	subscribed := false
	c.receive(c.bg, c.rdb.Subscribe(c.bg, c.channel, c.prefixChannel), func(msg any) {
		switch m := msg.(type) {
		case *redis.Subscription:
			// One confirmation per channel; the key channel's stands for both.
			if m.Kind == "subscribe" && m.Channel == c.channel {
				if subscribed {
					c.markAllStale()
				}
				subscribed = true
			}
		case *redis.Message:
			// Redis answers: no need to wait for the breaker's probe to
			// reload what this message drops.
			c.br.success()
			c.m.invalidations.WithLabelValues("received").Inc()
			if m.Channel == c.prefixChannel {
				c.dropLocalPrefix(m.Payload)
			} else {
				if c.bloom != nil {
					c.bloom.Add(m.Payload) // another instance may have Set a new key
				}
				c.dropLocal(m.Payload)
			}
		}
	}, func(err error) time.Duration {
		c.log.Debug("hotcache: invalidation subscription", "err", err)
		if cc, ok := c.rdb.(*redis.ClusterClient); ok {
			cc.ReloadState(c.bg) // the channel's node may be dead: reconnect to its successor (reloadOnFailure)
		}
		return 0
	})
}

// receive runs ps until ctx ends (Close): msg gets every message and subscription
// confirmation, fail every error. go-redis reconnects and resubscribes by
// itself at the next Receive after a connection error; receive waits before
// it 50 ms, doubling to 250 ms while errors follow each other, or as long
// as fail says if that is longer.
func (c *Client) receive(ctx context.Context, ps *redis.PubSub, msg func(any), fail func(error) time.Duration) {
	// Receive does not return when its context ends; closing ps unblocks it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		if stop() {
			_ = ps.Close()
		}
	}()
	backoff := 50 * time.Millisecond
	for {
		m, err := ps.Receive(ctx)
		if err == nil {
			backoff = 50 * time.Millisecond
			msg(m)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-time.After(max(backoff, fail(err))):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}
