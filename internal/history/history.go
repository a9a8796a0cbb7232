package history

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/hotset/decision"
)

// Config tunes a Store. A zero field means its default.
type Config struct {
	// Prefix starts every stream key; app A's stream is Prefix +
	// hotset.Escape(A). "" means "hotspot:history:/hotspot/"; hotspotd uses
	// "hotspot:history:" + its ZooKeeper root + "/", so clusters sharing a
	// Redis keep apart.
	Prefix string
	// MaxLen bounds each app's stream to about this many events (XADD
	// MAXLEN ~); 0 means 100_000.
	MaxLen int64
	// Retention trims events older than this (XTRIM MINID ~); 0 means 7
	// days; negative keeps events until MaxLen pushes them out.
	Retention time.Duration
	// Queue bounds the events waiting to be written; a full queue drops
	// the newest and counts them. 0 means 10_000.
	Queue int
	// MaxDelay is how long a write is retried; an event not stored within
	// MaxDelay of its decision is dropped and counted. 0 means 30s.
	MaxDelay time.Duration
	// MaxPerKey bounds each key's index stream, which answers the
	// queries for one key (the newest MaxPerKey events of a key, about);
	// 0 means 1000.
	MaxPerKey int64
	// MaxScan bounds the entries one Query reads from Redis when a time
	// range leaves most of them out; 0 means 100_000.
	MaxScan int

	Logger     *slog.Logger          // nil discards
	Registerer prometheus.Registerer // nil: metrics are kept but not exported
}

// Store writes and reads the history. Its methods are safe for concurrent
// use; Run runs once.
type Store struct {
	rdb  redis.UniversalClient
	cfg  Config
	log  *slog.Logger
	m    *metrics
	q    chan decision.Decision
	mu   sync.Mutex           // guards trim
	trim map[string]time.Time // stream -> when it was last trimmed by age
}

// New returns a Store over rdb.
func New(rdb redis.UniversalClient, cfg Config) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("history: nil Redis client")
	}
	cfg.Prefix = cmp.Or(cfg.Prefix, "hotspot:history:"+hotset.DefaultRoot+"/")
	cfg.MaxLen = cmp.Or(cfg.MaxLen, 100_000)
	cfg.Retention = cmp.Or(cfg.Retention, 7*24*time.Hour)
	cfg.Queue = cmp.Or(cfg.Queue, 10_000)
	cfg.MaxDelay = cmp.Or(cfg.MaxDelay, 30*time.Second)
	cfg.MaxPerKey = cmp.Or(cfg.MaxPerKey, 1000)
	cfg.MaxScan = cmp.Or(cfg.MaxScan, 100_000)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	switch {
	case cfg.MaxLen < 0 || cfg.MaxPerKey < 0:
		return nil, fmt.Errorf("history: MaxLen %d and MaxPerKey %d must be > 0", cfg.MaxLen, cfg.MaxPerKey)
	case cfg.Queue < 0 || cfg.MaxDelay < 0 || cfg.MaxScan < 0:
		return nil, errors.New("history: Queue, MaxDelay and MaxScan must be >= 0")
	}
	return &Store{rdb: rdb, cfg: cfg, log: cfg.Logger, m: newMetrics(cfg.Registerer),
		q: make(chan decision.Decision, cfg.Queue), trim: map[string]time.Time{}}, nil
}

// Stream returns the stream key of app.
func (s *Store) Stream(app string) string { return s.cfg.Prefix + hotset.Escape(app) }

// KeyStream returns the stream key of app's index of key: the same entries
// as app's stream, for key alone. An escaped name holds no "/", so it
// cannot be another app's stream.
func (s *Store) KeyStream(app, key string) string { return s.Stream(app) + "/" + hotset.Escape(key) }

// Record queues ds for Run to write. It never blocks: what does not fit in
// the queue is dropped and counted.
func (s *Store) Record(ds []decision.Decision) {
	for _, d := range ds {
		select {
		case s.q <- d:
		default:
			s.m.dropped.WithLabelValues("queue_full").Inc()
		}
	}
}

// Run writes queued events until ctx is canceled, retrying failed writes
// with backoff for up to MaxDelay. On cancel it writes what is queued (for
// at most 2s more) and returns nil.
func (s *Store) Run(ctx context.Context) error {
	// Writes outlive ctx: an event taken from the queue is written even
	// when shutdown begins meanwhile.
	wctx := context.WithoutCancel(ctx)
	batch := make([]decision.Decision, 0, 256)
	backoff := 100 * time.Millisecond
	failing := false
	for {
		select {
		case <-ctx.Done():
			s.flush(nil)
			return nil
		case d := <-s.q:
			batch = append(batch[:0], d)
		}
		batch = s.drain(batch)
		for len(batch) > 0 {
			var err error
			batch, err = s.write(wctx, batch)
			if err == nil {
				if failing {
					s.log.Info("history writes to Redis work again")
					failing = false
				}
				backoff = 100 * time.Millisecond
				break
			}
			if !failing {
				s.log.Warn("history write to Redis failed; retrying", "err", err)
				failing = true
			}
			batch = s.expire(batch, time.Now())
			if len(batch) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				s.flush(batch)
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// drain adds what is queued to batch, up to 512 events.
func (s *Store) drain(batch []decision.Decision) []decision.Decision {
	for len(batch) < 512 {
		select {
		case d := <-s.q:
			batch = append(batch, d)
		default:
			return batch
		}
	}
	return batch
}

// flush writes batch and what is queued at shutdown, within 2s.
func (s *Store) flush(batch []decision.Decision) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		batch = s.drain(batch)
		if len(batch) == 0 {
			return
		}
		left, err := s.write(ctx, batch)
		if err != nil {
			s.m.dropped.WithLabelValues("redis").Add(float64(len(left) + len(s.q)))
			s.log.Warn("history events lost at shutdown", "events", len(left)+len(s.q), "err", err)
			return
		}
		batch = batch[:0]
	}
}

// expire drops and counts the events of batch that can no longer be stored
// within MaxDelay of their decision.
func (s *Store) expire(batch []decision.Decision, now time.Time) []decision.Decision {
	keep := batch[:0]
	for _, d := range batch {
		if now.Sub(d.At) < s.cfg.MaxDelay {
			keep = append(keep, d)
		} else {
			s.m.dropped.WithLabelValues("redis").Inc()
		}
	}
	return keep
}

// Write appends ds to their apps' streams in one round trip and returns
// the first error. Run calls it; it is exported for benchmarks and tools.
func (s *Store) Write(ctx context.Context, ds []decision.Decision) error {
	_, err := s.write(ctx, ds)
	return err
}

// write appends ds in one pipeline and returns the events that failed.
func (s *Store) write(ctx context.Context, ds []decision.Decision) ([]decision.Decision, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pipe := s.rdb.Pipeline()
	adds := make([]*redis.StringCmd, len(ds))
	for i, d := range ds {
		values := []any{
			"v", "1",
			"at", d.At.UnixMilli(),
			"key", d.Key,
			"kind", d.Kind,
			"rate", strconv.FormatFloat(d.Rate, 'f', -1, 64),
			"rule", d.Rule,
		}
		if len(d.Sources) > 0 {
			// An optional field of version 1: readers that predate it
			// ignore it, and entries without it read as before.
			b, _ := json.Marshal(d.Sources) // strings and finite floats
			values = append(values, "sources", string(b))
		}
		adds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: s.Stream(d.App), MaxLen: s.cfg.MaxLen, Approx: true, Values: values})
		// The key's index: a query for one key reads only its events.
		// It expires with the retention once the key goes quiet.
		ks := s.KeyStream(d.App, d.Key)
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: ks, MaxLen: s.cfg.MaxPerKey, Approx: true, Values: values})
		if s.cfg.Retention > 0 {
			pipe.PExpire(ctx, ks, s.cfg.Retention)
		}
	}
	if s.cfg.Retention > 0 {
		minID := strconv.FormatInt(start.Add(-s.cfg.Retention).UnixMilli(), 10)
		for _, stream := range s.dueForTrim(ds, start) {
			pipe.XTrimMinIDApprox(ctx, stream, minID, 0)
		}
	}
	_, err := pipe.Exec(ctx)
	s.m.seconds.Observe(time.Since(start).Seconds())
	if err == nil {
		s.m.written.Add(float64(len(ds)))
		return nil, nil
	}
	var failed []decision.Decision
	for i, c := range adds {
		if c.Err() != nil {
			failed = append(failed, ds[i])
		}
	}
	s.m.written.Add(float64(len(ds) - len(failed)))
	if len(failed) == 0 {
		// Only a trim or an index write failed: the trim is retried with
		// the next write; a missed index entry leaves the event out of
		// queries by key, which is better than storing it twice.
		s.log.Warn("history index or trim write failed", "err", err)
		return nil, nil
	}
	return failed, fmt.Errorf("history: write %d events: %w", len(failed), err)
}

// dueForTrim returns the streams of ds not trimmed by age for a second, and
// marks them trimmed.
func (s *Store) dueForTrim(ds []decision.Decision, now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, d := range ds {
		st := s.Stream(d.App)
		if now.Sub(s.trim[st]) >= time.Second {
			s.trim[st] = now
			out = append(out, st)
		}
	}
	if len(s.trim) > 10_000 { // forget apps gone quiet; they are trimmed again at their next event
		for k, at := range s.trim {
			if now.Sub(at) > time.Minute {
				delete(s.trim, k)
			}
		}
	}
	return out
}
