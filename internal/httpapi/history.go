package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/history"
	"github.com/hotspot-dev/hotspot/internal/httpjson"
	"github.com/hotspot-dev/hotspot/internal/wire"
)

// History reads the stored promotions and demotions (internal/history).
type History interface {
	Query(ctx context.Context, q history.Query) (hotspotapi.History, error)
}

// history serves GET /v1/history?app=&key=&since=&until=&limit=.
func (a *server) history(w http.ResponseWriter, r *http.Request) {
	q, err := historyQuery(r.URL.Query())
	if err != nil {
		badRequest(w, err)
		return
	}
	if a.cfg.History == nil {
		httpjson.Indent(w, http.StatusNotImplemented, map[string]string{"error": "history is not kept: start hotspotd with --redis"})
		return
	}
	res, err := a.cfg.History.Query(r.Context(), q)
	switch {
	case errors.Is(err, history.ErrBadQuery):
		badRequest(w, err)
	case err != nil:
		a.log.Error("reading history", "app", q.App, "err", err)
		httpjson.Indent(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	default:
		httpjson.Indent(w, http.StatusOK, res)
	}
}

// historyQuery reads and checks the parameters of /v1/history.
func historyQuery(v url.Values) (history.Query, error) {
	var q history.Query
	var err error
	if q.App, err = appParam(v); err != nil {
		return q, err
	}
	if v.Has("key") {
		q.Key = v.Get("key")
		if q.Key == "" || len(q.Key) > wire.DefaultMaxKeyLen {
			return q, fmt.Errorf("key must be 1 to %d bytes", wire.DefaultMaxKeyLen)
		}
	}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if !v.Has(p.name) {
			continue
		}
		if *p.t, err = time.Parse(time.RFC3339, v.Get(p.name)); err != nil {
			return q, fmt.Errorf("%s must be an RFC 3339 time such as 2026-11-30T15:04:05Z, got %q", p.name, v.Get(p.name))
		}
	}
	if v.Has("limit") {
		s := v.Get("limit")
		if q.Limit, err = strconv.Atoi(s); err != nil || q.Limit < 1 || q.Limit > history.MaxLimit {
			return q, fmt.Errorf("limit must be an integer from 1 to %d, got %q", history.MaxLimit, s)
		}
	}
	return q, q.Check()
}
