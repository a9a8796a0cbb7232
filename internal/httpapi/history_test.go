package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/history"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
)

// fakeHistory answers every query with one event and keeps the query.
type fakeHistory struct{ got history.Query }

func (f *fakeHistory) Query(_ context.Context, q history.Query) (hotspotapi.History, error) {
	f.got = q
	return hotspotapi.History{App: q.App, Events: []hotspotapi.HistoryEvent{{At: time.UnixMilli(0).UTC(), Key: "k", Kind: "promoted", Rate: 1, Rule: -1}}}, nil
}

func TestHistoryParameters(t *testing.T) {
	fh := &fakeHistory{}
	h, err := New(Config{HotSet: func() *hotwatch.Snapshot { return nil }, Aggregators: noAggregators{}, History: fh})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)
	tests := []struct {
		url        string
		wantStatus int
		wantBody   string        // a part of the body
		wantQuery  history.Query // when 200
	}{
		{"/v1/history?app=shop", 200, `"rule": -1`, history.Query{App: "shop"}},
		{"/v1/history?app=shop&key=item:1&since=2026-11-30T15:00:00Z&until=2026-11-30T16:00:00.5%2B01:00&limit=5", 200, `"app": "shop"`,
			history.Query{App: "shop", Key: "item:1", Since: t0, Until: t0.Add(500 * time.Millisecond), Limit: 5}},
		{"/v1/history", 400, "app is required", history.Query{}},
		{"/v1/history?app=", 400, "app must be", history.Query{}},
		{"/v1/history?app=shop&key=", 400, "key must be", history.Query{}},
		{"/v1/history?app=shop&since=yesterday", 400, "since must be an RFC 3339 time", history.Query{}},
		{"/v1/history?app=shop&until=1764514800", 400, "until must be an RFC 3339 time", history.Query{}},
		{"/v1/history?app=shop&since=2026-11-30T16:00:00Z&until=2026-11-30T15:00:00Z", 400, "is before since", history.Query{}},
		{"/v1/history?app=shop&limit=0", 400, "limit must be an integer from 1 to 10000", history.Query{}},
		{"/v1/history?app=shop&limit=10001", 400, "limit must be", history.Query{}},
		{"/v1/history?app=shop&limit=ten", 400, "limit must be", history.Query{}},
	}
	for _, tt := range tests {
		fh.got = history.Query{}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.url, nil))
		if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
			t.Errorf("GET %s = %d %q, want %d containing %q", tt.url, rec.Code, rec.Body.String(), tt.wantStatus, tt.wantBody)
		}
		if got := fh.got; got.App != tt.wantQuery.App || got.Key != tt.wantQuery.Key || !got.Since.Equal(tt.wantQuery.Since) ||
			!got.Until.Equal(tt.wantQuery.Until) || got.Limit != tt.wantQuery.Limit {
			t.Errorf("GET %s: query %+v, want %+v", tt.url, got, tt.wantQuery)
		}
	}

	none, _ := New(Config{HotSet: func() *hotwatch.Snapshot { return nil }, Aggregators: noAggregators{}})
	rec := httptest.NewRecorder()
	none.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/history?app=shop", nil))
	if rec.Code != http.StatusNotImplemented || !strings.Contains(rec.Body.String(), "--redis") {
		t.Errorf("without history: %d %q, want 501 naming --redis", rec.Code, rec.Body.String())
	}
}
