package aggregator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// KeyState is one key's state at this shard, as its internal API answers it.
type KeyState = shardapi.KeyState

var (
	errNilPublisher = errors.New("aggregator: nil Publisher")
	errRunTwice     = errors.New("aggregator: Run called twice")
)

// Aggregator is one aggregator shard. Its methods are safe for concurrent
// use; Run runs once.
type Aggregator struct {
	cfg     Config
	pub     Publisher
	log     *slog.Logger
	m       *metrics
	t       *table
	kick    chan struct{} // a promotion waits for publication; capacity 1
	running atomic.Bool
	bufs    sync.Pool // *[]byte request bodies
}

// New checks cfg and returns an Aggregator that publishes through pub.
func New(cfg Config, pub Publisher) (*Aggregator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if pub == nil {
		return nil, errNilPublisher
	}
	m := newMetrics(cfg.Registerer)
	return &Aggregator{
		cfg:  cfg,
		pub:  pub,
		log:  cfg.Logger.With("shard", cfg.ID),
		m:    m,
		t:    newTable(newParams(cfg), m),
		kick: make(chan struct{}, 1),
	}, nil
}

// Run rebuilds the hot set this shard published before it restarted,
// registers the shard as a member, and then sweeps windows, publishes the
// hot set and collects dead shards' nodes until ctx is canceled. On cancel it
// publishes the final state (so readers keep the keys for a TTL while the
// ring hands them to another shard), deregisters and returns nil. It returns
// an error only when membership fails for good.
func (a *Aggregator) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return errRunTwice
	}
	a.restore(ctx)

	// Membership outlives the loops so that the final publication happens
	// while the shard is still registered, then leaves.
	joinCtx, leave := context.WithCancel(context.WithoutCancel(ctx))
	defer leave()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var joinErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		joinErr = a.pub.Join(joinCtx, hotset.Member{ID: a.cfg.ID, Addr: a.cfg.Addr})
		stop() // an early end of membership stops the shard
	})

	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return a.loop(gctx) })
	g.Go(func() error { return a.collect(gctx) })
	g.Go(func() error { return a.topkLoop(gctx) })
	_ = g.Wait() // the loops return nil; they log their errors

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*a.cfg.WriteTimeout)
	a.publish(fctx, time.Now(), true)
	cancel()
	a.record()
	leave()
	wg.Wait()
	if joinErr != nil && ctx.Err() == nil {
		a.log.Error("membership lost", "err", joinErr)
		return joinErr
	}
	return nil
}

// restore reads the nodes this shard wrote before a restart and holds their
// keys hot until the live stream confirms them or the hold runs out.
func (a *Aggregator) restore(ctx context.Context) {
	var shards []*hotset.Shard
	err := a.call(ctx, "load", func(ctx context.Context) (err error) {
		shards, err = a.pub.Load(ctx, a.cfg.ID)
		return err
	})
	if err != nil {
		// The live stream re-detects every hot key within a window; readers
		// keep the old node's keys for its TTL meanwhile.
		a.log.Warn("could not rebuild the hot set from ZooKeeper", "err", err)
		return
	}
	now := time.Now()
	for _, s := range shards {
		if s.Shard != a.cfg.ID || s.Expired(now) {
			continue
		}
		n := a.t.restore(s, now)
		a.log.Info("restored hot keys", "app", s.App, "keys", n)
	}
}

// loop sweeps windows every bucket and publishes what is due after each
// sweep and after each promotion.
func (a *Aggregator) loop(ctx context.Context) error {
	tick := time.NewTicker(a.cfg.Bucket)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if a.t.sweep(time.Now()) {
				a.log.Warn("this process was frozen; hot keys not confirmed within a window plus the hold are demoted")
			}
		case <-a.kick:
		}
		a.publish(ctx, time.Now(), false)
		// After the publication: a loop stuck in a ZooKeeper write stops
		// this clock, which is what the stalled-aggregator alert watches.
		a.m.swept.Set(float64(time.Now().UnixNano()) / 1e9)
		a.record()
	}
}

// collect deletes the nodes of departed shards every GCInterval.
func (a *Aggregator) collect(ctx context.Context) error {
	tick := time.NewTicker(a.cfg.GCInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		var n int
		err := a.call(ctx, "collect", func(ctx context.Context) (err error) {
			n, err = a.pub.Collect(ctx, a.cfg.ID, 2*a.cfg.TTL)
			return err
		})
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Warn("garbage collection of dead shards failed", "err", err)
		case n > 0:
			a.m.collected.Add(float64(n))
			a.log.Info("deleted nodes of departed shards", "nodes", n)
		}
	}
}

// Top returns up to n of app's busiest keys at this shard, hot or not,
// busiest first, as of the last sweep (at most one Bucket old). n is capped
// at TopK.
func (a *Aggregator) Top(app string, n int) []KeyState {
	return a.t.top(app, n, time.Now())
}

// Key returns the current state of (app, key) at this shard, and false when
// the shard does not track it (no recent counts, or another shard owns it).
func (a *Aggregator) Key(app, key string) (KeyState, bool) {
	return a.t.key(app, key, time.Now())
}

// Instances returns the effect of every instance of app ("": of every
// app) whose reports reach this shard and that reported any over the effect
// window, per second, summed over its keys.
func (a *Aggregator) Instances(app string) []shardapi.InstanceEffectRates {
	return a.t.instanceEffects(app, time.Now())
}

// Effects returns the effect of every key of app ("": of every app) that
// the shard has effect reports of over the effect window, per second.
func (a *Aggregator) Effects(app string) []shardapi.KeyEffectRates {
	return a.t.effects(app, time.Now())
}

// wake asks the loop to publish now.
func (a *Aggregator) wake() {
	select {
	case a.kick <- struct{}{}:
	default: // a publication is already pending
	}
}
