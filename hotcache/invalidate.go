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
// Bound: while the Pub/Sub connection is up, every instance drops the key
// within the broadcast latency (about a millisecond on one network) after
// Set returns, and drops any old value read back in the race window at
// DoubleDeleteDelay plus that latency. If an instance's Pub/Sub connection is
// lost, it marks every hot value stale when it resubscribes, and in any case a
// hot value is never served older than the L1 TTL unless every reload fails.

// Set writes value for key through the Loader's Writer and invalidates key in
// Redis and in every instance's L1.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	if c.closed.Load() {
		return ErrClosed
	}
	w, ok := c.o.loader.(Writer)
	if !ok {
		return errors.New("hotcache: Set needs a Loader that implements Writer")
	}
	if err := w.Write(ctx, key, value); err != nil {
		return fmt.Errorf("hotcache: set %q: %w", key, err)
	}
	if c.bloom != nil {
		c.bloom.add(key)
	}
	return c.invalidate(ctx, key)
}

// Delete deletes key through the Loader's Writer, if the Loader is one, and
// invalidates key in Redis and in every instance's L1. Without a Writer it
// only invalidates.
func (c *Client) Delete(ctx context.Context, key string) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if w, ok := c.o.loader.(Writer); ok {
		if err := w.Delete(ctx, key); err != nil {
			return fmt.Errorf("hotcache: delete %q: %w", key, err)
		}
	}
	return c.invalidate(ctx, key)
}

func (c *Client) invalidate(ctx context.Context, key string) error {
	c.dropLocal(key)
	if c.rdb == nil {
		return nil
	}
	err := c.delAndPublish(ctx, key)
	// Again: a reload started by the first drop may have read Redis before
	// the DEL. (The instance also receives its own broadcast.)
	c.dropLocal(key)
	c.spawn(func() {
		t := time.NewTimer(c.o.doubleDelete)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.bg.Done(): // closing: do it now rather than never
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.bg), c.o.opTimeout)
		defer cancel()
		if err := c.delAndPublish(ctx, key); err != nil {
			c.log.Warn("hotcache: second delete failed", "key", key, "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("hotcache: %q written but not invalidated everywhere: %w", key, err)
	}
	return nil
}

func (c *Client) delAndPublish(ctx context.Context, key string) error {
	if !c.br.allow() {
		return errBreakerOpen
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.opTimeout)
	defer cancel()
	repErr := make(chan error, 1)
	if c.rep != nil {
		// Every replica, whether or not the key is hot here, at the same
		// time as the owner and before the broadcast. A failure is one
		// node's, not Redis's as a whole: it does not trip the breaker,
		// and the broadcast still goes out.
		go func() { repErr <- c.rep.delAll(ctx, key) }()
	} else {
		repErr <- nil
	}
	if err := c.rdb.Del(ctx, c.o.redisPrefix+key).Err(); err != nil {
		<-repErr
		c.br.failure()
		return fmt.Errorf("%w: redis del: %w", ErrUnavailable, err)
	}
	if err := c.rdb.Publish(ctx, c.channel, key).Err(); err != nil {
		c.br.failure()
		return fmt.Errorf("%w: redis publish: %w", ErrUnavailable, err)
	}
	c.br.success()
	c.m.invalidations.WithLabelValues("sent").Inc()
	if err := <-repErr; err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// subscribe receives invalidations until Close. go-redis reconnects and
// resubscribes by itself after a connection error; a resubscription means
// broadcasts may have been missed, so every hot value is marked stale.
func (c *Client) subscribe() {
	ps := c.rdb.Subscribe(c.bg, c.channel)
	// Receive does not return when its context ends; closing ps unblocks it.
	stop := context.AfterFunc(c.bg, func() { _ = ps.Close() })
	defer func() {
		if stop() {
			_ = ps.Close()
		}
	}()
	subscribed := false
	backoff := 50 * time.Millisecond
	for {
		msg, err := ps.Receive(c.bg)
		if err != nil {
			if c.bg.Err() != nil {
				return
			}
			c.log.Debug("hotcache: invalidation subscription", "err", err)
			select {
			case <-time.After(backoff):
			case <-c.bg.Done():
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if subscribed {
					c.markAllStale()
				}
				subscribed = true
			}
		case *redis.Message:
			c.m.invalidations.WithLabelValues("received").Inc()
			c.dropLocal(m.Payload)
		}
	}
}
