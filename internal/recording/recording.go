// Package recording keeps what the aggregator decides beyond the hot set: the
// history of promotions and demotions in Redis and the webhooks' deliveries.
// It is what hotspotd hands the aggregator as its Recorder and the API as its
// History and Webhooks.
package recording

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/hotset/decision"
	"github.com/hotspot-dev/hotspot/internal/history"
	"github.com/hotspot-dev/hotspot/internal/httpapi"
	"github.com/hotspot-dev/hotspot/internal/webhook"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// Config says what to record. A zero field means its default.
type Config struct {
	Root string // the ZooKeeper root: the webhooks' subscriptions and the history's Redis prefix
	// Shard is this aggregator's member ID. Empty: the process decides
	// nothing, so nothing is recorded here; the API still reads and manages
	// the history and the webhooks.
	Shard string
	// Redis is where the history is kept; nil keeps none.
	Redis *redis.Options
	// HistoryMaxLen is about how many events are kept per app (default
	// 100,000); HistoryRetention trims older ones (default 7 days;
	// negative: only HistoryMaxLen trims).
	HistoryMaxLen    int64
	HistoryRetention time.Duration

	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Recording is the history and the webhooks of one hotspotd.
type Recording struct {
	rdb     *redis.Client  // nil without Config.Redis
	history *history.Store // nil without Config.Redis
	hooks   *webhook.Store
	recs    []interface {
		Record([]decision.Decision)
		Run(context.Context) error
	}
	log  *slog.Logger
	stop func()
	wg   sync.WaitGroup
}

// New opens the stores. Redis need not answer yet: history writes retry and
// history queries fail until it does.
func New(ctx context.Context, sess *zkgroup.Session, cfg Config) (*Recording, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	r := &Recording{log: log, stop: func() {}, hooks: webhook.NewStore(sess, cfg.Root)}
	if cfg.Shard != "" {
		// The shard that decides an event delivers it: each event reaches
		// each subscription once.
		d, err := webhook.New(sess, webhook.Config{Root: cfg.Root, Shard: cfg.Shard, Logger: log, Registerer: cfg.Registerer})
		if err != nil {
			return nil, err
		}
		r.recs = append(r.recs, d)
	}
	if cfg.Redis == nil {
		return r, nil
	}
	r.rdb = redis.NewClient(cfg.Redis)
	h, err := history.New(r.rdb, history.Config{
		Prefix: "hotspot:history:" + cfg.Root + "/", MaxLen: cfg.HistoryMaxLen, Retention: cfg.HistoryRetention,
		Logger: log, Registerer: cfg.Registerer,
	})
	if err != nil {
		r.rdb.Close()
		return nil, err
	}
	r.history = h
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := r.rdb.Ping(pctx).Err(); err != nil {
		// Detection does not need Redis.
		log.Warn("Redis does not answer; history is kept once it does", "redis", cfg.Redis.Addr, "err", err)
	}
	cancel()
	if cfg.Shard != "" {
		r.recs = append(r.recs, h)
	}
	return r, nil
}

// Records reports whether anything records decisions here: an aggregator's
// Recorder is the Recording then, and none otherwise.
func (r *Recording) Records() bool { return len(r.recs) > 0 }

// Record hands ds to every recorder (the aggregator's Recorder); none of
// them blocks.
func (r *Recording) Record(ds []decision.Decision) {
	for _, rec := range r.recs {
		rec.Record(ds)
	}
}

// Webhooks returns the API's view of the webhook subscriptions.
func (r *Recording) Webhooks() httpapi.Webhooks { return r.hooks }

// History returns the API's view of the history; nil when none is kept.
func (r *Recording) History() httpapi.History {
	if r.history == nil {
		return nil
	}
	return r.history
}

// Start runs the recorders until Close, which must come after the
// aggregator's Run returned so that its last decisions are written.
func (r *Recording) Start() {
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

// Close stops the recorders, waits for them to write what they hold, and
// closes the Redis client.
func (r *Recording) Close() {
	r.stop()
	r.wg.Wait()
	if r.rdb != nil {
		r.rdb.Close()
	}
}
