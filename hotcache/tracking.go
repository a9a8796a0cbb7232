package hotcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Writes that bypass Hotspot: Redis client tracking.
//
// A write through this Client, another instance or a hotspot-proxy is
// broadcast (invalidate.go). A write by anything else (a service without the
// SDK, redis-cli, a script) is not; without tracking, instances serve the old
// value until the L1 TTL. With one Redis server, the Client asks Redis to tell
// it of such writes (CLIENT TRACKING, Redis 6 and later):
//   - a connection of its own subscribes to __redis__:invalidate (RESP2,
//     where Redis delivers invalidations as Pub/Sub messages), beside the
//     broadcast subscription, which a refusal here never disturbs;
//   - every hot-key read from Redis is sent as CLIENT TRACKING ON REDIRECT
//     <that connection> OPTIN, CLIENT CACHING YES, GET, in one round trip, so
//     Redis remembers, for this Client, the hot keys it read and nothing else;
//   - when any client changes or deletes such a key (or it expires or is
//     evicted), Redis sends its name once on that connection, and the Client
//     drops it as it drops a broadcast key. Its reload is tracked again.
// That connection's ID is used only once its subscription is confirmed, and
// forgotten as soon as the connection fails: a read never redirects to an ID
// that may name another client of a restarted server. A resubscription marks
// every hot value stale, as for missed broadcasts; a flush (FLUSHALL,
// FLUSHDB) does the same, and so does the first confirmation if a hot key
// was read before it (untracked). A Redis that refuses tracking (before 6, or an ACL
// without CLIENT or the channel) leaves the L1 TTL as the bound, with a
// warning; after a read it answered untracked, reads are sent as plain GETs
// for trackingRetry before tracking is asked again.
//
// On a Redis Cluster, one such connection per master (clustertracking.go).
// Not with a Ring, Sentinel or hot-key replicas over plain servers: the
// redirect must name a connection on the server that holds the key, and
// must not outlive a failover. There the L1 TTL is the bound.

// trackingChannel is where Redis sends invalidations to a RESP2 connection.
const trackingChannel = "__redis__:invalidate"

// trackingRetry is how long hot-key reads are sent untracked after Redis
// refused to track one: a Redis before 6 would otherwise fail two commands
// in every read, and an ACL may be changed to allow it.
const trackingRetry = time.Minute

// failoverAddr is the Addr go-redis gives the options of a client made by
// NewFailoverClient, whose server changes at a failover.
const failoverAddr = "FailoverClient"

// tracking is the state of Redis client tracking for a Client.
type tracking struct {
	sub    *redis.Client // the subscriber's own client: one Pub/Sub connection
	connID atomic.Int64  // the subscriber connection's ID, as it connects
	id     atomic.Int64  // the ID reads redirect to; 0: do not track now
	// offUntil is when reads may ask for tracking again after a refusal,
	// in Unix nanoseconds.
	offUntil atomic.Int64
	stop     context.CancelFunc // ends the subscriber of a cluster node's (clustertracking.go)
	// confirmed is closed at the subscription's first confirmation, which
	// the first reads wait for until waitUntil (see redirect).
	confirmed chan struct{}
	confirm   sync.Once
	waitUntil time.Time
	// missed is set when a hot key was read untracked because the
	// subscription was not confirmed yet: its confirmation then marks
	// every hot value stale, so that their reloads are tracked.
	missed atomic.Bool
}

// trackingWait is how long after its tracking connection is made the
// first hot-key reads wait for the subscription's confirmation, rather than
// go untracked: on a live Redis it comes within a round trip.
const trackingWait = 250 * time.Millisecond

// newTracking returns the tracking state for a Client whose L2 is rdb, or
// nil when tracking does not apply (see above). refused is called when
// Redis will not give the subscriber's connection ID: that connection then
// subscribes without tracking.
func newTracking(o options, rdb redis.UniversalClient, hasReplicas bool, refused func(error)) *tracking {
	single, ok := rdb.(*redis.Client)
	if !o.tracking || !ok || hasReplicas || len(o.redisSentinels) > 0 {
		return nil
	}
	src := single.Options()
	if src.Addr == failoverAddr {
		return nil // a Sentinel client given to WithRedisClient
	}
	return newServerTracking(src, refused)
}

// newServerTracking returns the tracking state for one server, reached
// with src's address, credentials and timeouts.
func newServerTracking(src *redis.Options, refused func(error)) *tracking {
	t := &tracking{confirmed: make(chan struct{}), waitUntil: time.Now().Add(trackingWait)}
	// The fields that reach the same server as the same user, copied one by
	// one: go-redis changes others of a live client's Options as it connects.
	opt := redis.Options{
		Network: src.Network, Addr: src.Addr, Dialer: src.Dialer, TLSConfig: src.TLSConfig,
		Username: src.Username, Password: src.Password, CredentialsProvider: src.CredentialsProvider,
		CredentialsProviderContext: src.CredentialsProviderContext, StreamingCredentialsProvider: src.StreamingCredentialsProvider,
		DB: src.DB, DialTimeout: src.DialTimeout, ReadTimeout: src.ReadTimeout, WriteTimeout: src.WriteTimeout,
		Protocol: 2, // invalidations as Pub/Sub messages
		PoolSize: 1,
	}
	userConnect := src.OnConnect
	opt.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		if userConnect != nil {
			if err := userConnect(ctx, cn); err != nil {
				return err
			}
		}
		id, err := cn.ClientID(ctx).Result()
		if err != nil && isNetErr(err) {
			return err
		}
		if err != nil {
			refused(err) // an ACL without CLIENT ID
			id = 0
		}
		t.connID.Store(id)
		return nil
	}
	t.sub = redis.NewClient(&opt)
	return t
}

// subscribed is called when the subscription is confirmed on a connection:
// reads may redirect to it from now on.
func (t *tracking) subscribed() {
	t.id.Store(t.connID.Load())
	t.confirm.Do(func() { close(t.confirmed) })
}

// lost is called when the subscriber's connection failed.
func (t *tracking) lost() { t.id.Store(0) }

// redirect returns the ID a tracked read redirects to, or 0 when a read
// cannot be tracked now: for trackingRetry after a refusal, or while the
// subscription is down. Before its first confirmation a read waits for it
// until waitUntil; one that cannot wait has the confirmation reload every
// hot key (see missed).
func (t *tracking) redirect(ctx context.Context) int64 {
	if time.Now().UnixNano() < t.offUntil.Load() {
		return 0
	}
	id := t.id.Load()
	if id == 0 {
		if wait := time.Until(t.waitUntil); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-t.confirmed:
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
			id = t.id.Load()
		}
	}
	if id == 0 {
		t.missed.Store(true)
		id = t.id.Load() // confirmed meanwhile: it may have seen missed unset
	}
	return id
}

// trackedGet reads key (the Redis key) with tracking on, if the subscriber is
// connected; otherwise as a plain GET.
func (c *Client) trackedGet(ctx context.Context, key string) ([]byte, error) {
	var get *redis.StringCmd
	c.trackedRead(ctx, key, func(p redis.Pipeliner) redis.Cmder {
		get = p.Get(ctx, key)
		return get
	})
	if get == nil {
		return nil, fmt.Errorf("hotcache: no Redis Cluster master known for %q", key)
	}
	return get.Bytes()
}

// trackedRead sends the command read adds on the server that holds record
// (the one server, or the record's master on a cluster). When that
// server's tracking connection is confirmed, CLIENT TRACKING ON REDIRECT
// <it> OPTIN and CLIENT CACHING YES go first, in the same round trip, so
// that Redis tells of the next write to record. A refusal of those is
// counted, and turns tracking off on that server for trackingRetry. On a
// cluster whose master for record is unknown nothing is sent.
func (c *Client) trackedRead(ctx context.Context, record string, read func(redis.Pipeliner) redis.Cmder) {
	node, t := c.rdb, c.track
	if c.ctrack != nil {
		m, err := c.ctrack.cc.MasterForKey(ctx, record)
		if err != nil {
			return
		}
		node, t = m, c.ctrack.node(c, m)
	}
	id := int64(0)
	if t != nil {
		id = t.redirect(ctx)
	}
	var on *redis.StatusCmd
	var caching *redis.Cmd
	var r redis.Cmder
	_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		if id != 0 {
			on = p.ClientTrackingOn(ctx, &redis.ClientTrackingOptions{Redirect: id, OptIn: true})
			caching = p.Do(ctx, "client", "caching", "yes")
		}
		r = read(p)
		return nil
	})
	if id == 0 {
		return
	}
	if err := errors.Join(on.Err(), caching.Err()); err != nil && !isNetErr(err) {
		if rerr := r.Err(); rerr == nil || errors.Is(rerr, redis.Nil) || wrongType(rerr) {
			c.trackingRefused(err) // Redis answered the read, not the rest
			t.offUntil.Store(time.Now().Add(trackingRetry).UnixNano())
		}
	}
}

// ownWriteWindow is how long after this instance wrote a hot key back to
// Redis (after a miss) the next message about the key is checked before it
// is acted on: it is most likely about that write.
const ownWriteWindow = time.Second

// ownWrite is a value this instance wrote back to Redis after a miss, and
// when.
type ownWrite struct {
	at   time.Time
	data []byte
}

// changed is called when Redis told of a write to hot key key soon after
// this instance wrote w back. Redis forgets the key for this Client once it
// told of it, so changed asks again, reading the key in the same round
// trip, and reports whether Redis holds another value than w. When it does
// not, the write was most likely w itself, and the key is kept: no reload
// (its load, if still in flight, installs w), and on a cluster its copies
// stay.
func (c *Client) changed(key string, w *ownWrite) bool {
	ctx, cancel := context.WithTimeout(c.bg, c.o.opTimeout)
	defer cancel()
	data, err := c.trackedGet(ctx, c.o.redisPrefix+key)
	return err != nil || !bytes.Equal(data, w.data)
}

// trackingRefused counts a refusal of tracking by Redis (a read it answered
// untracked, or the tracking connection's ID or subscription), and warns
// once.
func (c *Client) trackingRefused(err error) {
	if err == nil {
		return
	}
	c.m.trackingRefused.Inc()
	if !c.trackWarned.Swap(true) {
		c.log.Warn("hotcache: Redis refused client tracking; a write that bypasses Hotspot reaches L1 only at the L1 TTL", "err", err)
	}
}

// trackWrites receives on t's connection until ctx ends (Close): the keys
// Redis reports changed. A resubscription means messages may have been
// missed, so every hot value is marked stale. lost, if not nil, is called
// after each connection failure.
func (c *Client) trackWrites(ctx context.Context, t *tracking, lost func()) {
	ps := t.sub.Subscribe(ctx, trackingChannel)
	subscribed := false
	c.receive(ctx, ps, func(msg any) {
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				t.subscribed()
				if t.missed.Swap(false) || subscribed {
					c.markAllStale()
				}
				subscribed = true
			}
		case *redis.Message:
			c.br.success()
			c.trackedKeys(m)
		}
	}, func(err error) time.Duration {
		c.log.Debug("hotcache: tracking subscription", "err", err)
		var refused redis.Error
		switch {
		case isNetErr(err):
			t.lost() // until the next confirmation
			if lost != nil {
				lost()
			}
		case errors.As(err, &refused):
			// Redis refused the subscription (an ACL without the channel):
			// ask again, slowly.
			t.lost()
			c.trackingRefused(err)
			_ = ps.Subscribe(ctx, trackingChannel)
			return 5 * time.Second
		default:
			c.markAllStale() // a message go-redis could not read: a flush's
		}
		return 0
	})
}

// trackedKeys handles a message on trackingChannel: the keys some client
// changed. (A flush's message, with no keys, is one go-redis cannot read:
// trackWrites marks every hot value stale on that error.) A string payload,
// published by hand, names one key.
func (c *Client) trackedKeys(m *redis.Message) {
	keys := m.PayloadSlice
	if keys == nil {
		keys = []string{m.Payload}
	}
	c.m.invalidations.WithLabelValues("tracked").Add(float64(len(keys)))
	for _, k := range keys {
		key, ok := strings.CutPrefix(k, c.o.redisPrefix)
		if !ok {
			continue
		}
		if e := c.hot.Load().m[key]; e != nil {
			// The first message after the instance's write-back is most
			// likely about it: only that one is checked.
			if w := e.ownWrite.Swap(nil); w != nil && time.Since(w.at) < ownWriteWindow && !c.changed(key, w) {
				continue // its own write-back: L1 (and a cluster's copies) hold what Redis does
			}
			if c.ctrack != nil && c.rep != nil {
				// The copies hold the old value: the reload must not
				// find it there (see clusterTracking).
				c.ctrack.dropCopies(c, key)
			}
		}
		c.dropLocal(key) // a key demoted since too: its value may sit among the cold ones
	}
}

// isNetErr reports whether err means the connection failed (or could not be
// made), as opposed to a reply Redis or go-redis refused.
func isNetErr(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, redis.ErrClosed) || errors.As(err, &ne)
}
