package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/hotspotapi"
)

// MaxLimit is the largest Limit of a Query: the API's.
const MaxLimit = hotspotapi.MaxHistoryLimit

// DefaultLimit is the Limit of a Query that sets none: the API's.
const DefaultLimit = hotspotapi.DefaultHistoryLimit

// Query selects events of one app.
type Query struct {
	App   string    // required
	Key   string    // "" means every key
	Since time.Time // zero means no lower bound; inclusive
	Until time.Time // zero means no upper bound; inclusive
	Limit int       // 0 means DefaultLimit; at most MaxLimit
}

// ErrBadQuery wraps the errors of a Query that can never succeed.
var ErrBadQuery = errors.New("history: bad query")

// Check reports what is wrong with q, wrapping ErrBadQuery.
func (q Query) Check() error {
	switch {
	case q.App == "":
		return fmt.Errorf("%w: app is required", ErrBadQuery)
	case q.Limit < 0 || q.Limit > MaxLimit:
		return fmt.Errorf("%w: limit must be from 1 to %d, got %d", ErrBadQuery, MaxLimit, q.Limit)
	case !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since):
		return fmt.Errorf("%w: until %s is before since %s", ErrBadQuery,
			q.Until.Format(time.RFC3339Nano), q.Since.Format(time.RFC3339Nano))
	}
	return nil
}

// Query returns app's events that match q, newest first (in the order they
// were stored), at most q.Limit of them: the answer of /v1/history, whose
// Truncated is set when the query stopped after MaxScan entries without
// finding Limit matches. (Only events stored long after their decision time
// can cause that.)
func (s *Store) Query(ctx context.Context, q Query) (hotspotapi.History, error) {
	if err := q.Check(); err != nil {
		return hotspotapi.History{}, err
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	res := hotspotapi.History{App: q.App, Events: []hotspotapi.HistoryEvent{}}
	// An entry's ID is Redis's clock when it was stored: within MaxDelay
	// (plus clock skew, allowed for with slack) after the decision, and
	// never before it by more than the skew.
	const skew = 10 * time.Second
	hi, lo := "+", "-"
	if !q.Until.IsZero() {
		hi = strconv.FormatInt(q.Until.Add(s.cfg.MaxDelay+skew).UnixMilli(), 10)
	}
	if !q.Since.IsZero() {
		lo = strconv.FormatInt(max(0, q.Since.Add(-skew).UnixMilli()), 10)
	}
	stream := s.Stream(q.App)
	if q.Key != "" {
		stream = s.KeyStream(q.App, q.Key)
	}
	page := int64(q.Limit)
	if !q.Since.IsZero() || !q.Until.IsZero() {
		page = max(page, 1000) // the entries scanned for clock slack do not match
	}
	scanned := 0
	for {
		n := min(page, int64(s.cfg.MaxScan-scanned))
		if n <= 0 {
			res.Truncated = true
			return res, nil
		}
		msgs, err := s.rdb.XRevRangeN(ctx, stream, hi, lo, n).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return hotspotapi.History{}, fmt.Errorf("history: read %s: %w", stream, err)
		}
		scanned += len(msgs)
		for _, m := range msgs {
			ev, err := decode(m)
			if err != nil {
				s.log.Warn("skipping a history entry it cannot read", "stream", stream, "id", m.ID, "err", err)
				continue
			}
			if (q.Key != "" && ev.Key != q.Key) || (!q.Since.IsZero() && ev.At.Before(q.Since)) ||
				(!q.Until.IsZero() && ev.At.After(q.Until)) {
				continue
			}
			res.Events = append(res.Events, ev)
			if len(res.Events) == q.Limit {
				return res, nil
			}
		}
		if int64(len(msgs)) < n {
			return res, nil
		}
		hi = "(" + msgs[len(msgs)-1].ID
		page = min(2*page, 10_000) // fewer round trips through a long filtered scan
	}
}

// decode reads one stream entry (encoding version 1, docs/history.md; its
// sources field is optional).
func decode(m redis.XMessage) (hotspotapi.HistoryEvent, error) {
	str := func(f string) string { s, _ := m.Values[f].(string); return s }
	if v := str("v"); v != "1" {
		return hotspotapi.HistoryEvent{}, fmt.Errorf("unknown encoding version %q", v)
	}
	at, err := strconv.ParseInt(str("at"), 10, 64)
	if err != nil {
		return hotspotapi.HistoryEvent{}, fmt.Errorf("at: %w", err)
	}
	rate, err := strconv.ParseFloat(str("rate"), 64)
	if err != nil {
		return hotspotapi.HistoryEvent{}, fmt.Errorf("rate: %w", err)
	}
	rule, err := strconv.Atoi(str("rule"))
	if err != nil {
		return hotspotapi.HistoryEvent{}, fmt.Errorf("rule: %w", err)
	}
	kind := str("kind")
	if kind != "promoted" && kind != "demoted" {
		return hotspotapi.HistoryEvent{}, fmt.Errorf("unknown kind %q", kind)
	}
	key, ok := m.Values["key"].(string)
	if !ok || key == "" {
		return hotspotapi.HistoryEvent{}, errors.New("no key")
	}
	ev := hotspotapi.HistoryEvent{At: time.UnixMilli(at).UTC(), Key: key, Kind: kind, Rate: rate, Rule: rule}
	if s := str("sources"); s != "" {
		if err := json.Unmarshal([]byte(s), &ev.Sources); err != nil {
			return hotspotapi.HistoryEvent{}, fmt.Errorf("sources: %w", err)
		}
	}
	return ev, nil
}
