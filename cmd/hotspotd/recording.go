package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/aggregator"
	"github.com/hotspot-dev/hotspot/hotset/decision"
	"github.com/hotspot-dev/hotspot/internal/history"
	"github.com/hotspot-dev/hotspot/internal/httpapi"
	"github.com/hotspot-dev/hotspot/internal/webhook"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// recording is what the aggregator tells its decisions to (the history in
// Redis, the webhooks), and what the API reads and manages them through.
type recording struct {
	rdb     *redis.Client  // nil without --redis
	history *history.Store // nil without --redis
	hooks   *webhook.Store
	recs    []interface {
		aggregator.Recorder
		Run(context.Context) error
	}
	log  *slog.Logger
	stop func()
	wg   sync.WaitGroup
}

func newRecording(ctx context.Context, cfg config, sess *zkgroup.Session, log *slog.Logger, reg prometheus.Registerer) (*recording, error) {
	r := &recording{log: log, stop: func() {}, hooks: webhook.NewStore(sess, cfg.zkRoot)}
	if cfg.aggregator {
		// The shard that decides an event delivers it: each event reaches
		// each subscription once.
		d, err := webhook.New(sess, webhook.Config{Root: cfg.zkRoot, Shard: cfg.id, Logger: log, Registerer: reg})
		if err != nil {
			return nil, err
		}
		r.recs = append(r.recs, d)
	}
	if cfg.redis != "" {
		opts := &redis.Options{Addr: cfg.redis}
		if strings.Contains(cfg.redis, "://") {
			var err error
			if opts, err = redis.ParseURL(cfg.redis); err != nil {
				return nil, fmt.Errorf("--redis: %w", err)
			}
		}
		if err := cfg.redisOptions(opts); err != nil {
			return nil, err
		}
		r.rdb = redis.NewClient(opts)
		retention := cfg.historyRetention
		if retention == 0 {
			retention = -1 // the flag's 0 keeps events until the length bound
		}
		h, err := history.New(r.rdb, history.Config{
			Prefix: "hotspot:history:" + cfg.zkRoot + "/", MaxLen: cfg.historyMaxLen, Retention: retention,
			Logger: log, Registerer: reg,
		})
		if err != nil {
			r.rdb.Close()
			return nil, err
		}
		r.history = h
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := r.rdb.Ping(pctx).Err(); err != nil {
			// Detection does not need Redis: history writes retry and
			// queries fail until it answers.
			log.Warn("Redis does not answer; history is kept once it does", "redis", opts.Addr, "err", err)
		}
		cancel()
		if cfg.aggregator {
			r.recs = append(r.recs, h)
		}
	}
	return r, nil
}

// recorder returns what the aggregator tells its decisions to; nil for none.
func (r *recording) recorder() aggregator.Recorder {
	if len(r.recs) == 0 {
		return nil
	}
	return r
}

// Record hands ds to every recorder; none of them blocks.
func (r *recording) Record(ds []decision.Decision) {
	for _, rec := range r.recs {
		rec.Record(ds)
	}
}

// webhooks returns the API's view of the webhook subscriptions.
func (r *recording) webhooks() httpapi.Webhooks { return r.hooks }

// api returns the API's view of the history (nil: not kept).
func (r *recording) api() httpapi.History {
	if r.history == nil {
		return nil
	}
	return r.history
}

// start runs the recorders until shutdown, which must come after the
// aggregator's Run returned so that its last decisions are written.
func (r *recording) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	for _, rec := range r.recs {
		r.wg.Go(func() {
			if err := rec.Run(ctx); err != nil {
				r.log.Error("recording stopped", "err", err)
			}
		})
	}
}

// close stops the recorders, waits for them to write what they hold, and
// closes the Redis client.
func (r *recording) close() {
	r.stop()
	r.wg.Wait()
	if r.rdb != nil {
		r.rdb.Close()
	}
}
