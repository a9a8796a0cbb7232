package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/webhook"
)

// fakeWebhooks keeps subscriptions in memory, checking them like the Store.
type fakeWebhooks struct {
	mu   sync.Mutex
	subs map[string][]webhook.Subscription // app -> subscriptions
}

func (f *fakeWebhooks) List(_ context.Context, app string) ([]webhook.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.subs[app]), nil
}

func (f *fakeWebhooks) Put(_ context.Context, app string, s webhook.Subscription) error {
	if err := s.Check(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[app] = append(slices.DeleteFunc(f.subs[app], func(x webhook.Subscription) bool { return x.Name == s.Name }), s)
	return nil
}

func (f *fakeWebhooks) Delete(_ context.Context, app, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[app] = slices.DeleteFunc(f.subs[app], func(x webhook.Subscription) bool { return x.Name == name })
	return nil
}

func TestWebhookRoutes(t *testing.T) {
	hooks := &fakeWebhooks{subs: map[string][]webhook.Subscription{}}
	newAPI := func(token string) http.Handler {
		h, err := New(Config{HotSet: func() *hotwatch.Snapshot { return nil }, Aggregators: noAggregators{},
			Webhooks: hooks, AdminToken: token})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	withToken, noToken := newAPI("s3cret"), newAPI("")
	const ok = "Bearer s3cret"
	tests := []struct {
		name       string
		h          http.Handler
		method     string
		url        string
		auth, body string
		wantStatus int
		wantBody   string
	}{
		{"refused without a configured token", noToken, "PUT", "/v1/webhooks/ops?app=shop", ok, `{"url":"http://r/"}`, 403, "--admin-token"},
		{"no credentials", withToken, "PUT", "/v1/webhooks/ops?app=shop", "", `{"url":"http://r/"}`, 401, "admin token"},
		{"wrong token", withToken, "DELETE", "/v1/webhooks/ops?app=shop", "Bearer nope", "", 401, "admin token"},
		{"listing needs the token too", withToken, "GET", "/v1/webhooks?app=shop", "", "", 401, "admin token"},
		{"app is required", withToken, "PUT", "/v1/webhooks/ops", ok, `{"url":"http://r/"}`, 400, "app is required"},
		{"bad name", withToken, "PUT", "/v1/webhooks/a%20b?app=shop", ok, `{"url":"http://r/"}`, 400, "name"},
		{"body not JSON", withToken, "PUT", "/v1/webhooks/ops?app=shop", ok, `url=http://r/`, 400, "body must be JSON"},
		{"unknown field", withToken, "PUT", "/v1/webhooks/ops?app=shop", ok, `{"uri":"http://r/"}`, 400, "body must be JSON"},
		{"bad url", withToken, "PUT", "/v1/webhooks/ops?app=shop", ok, `{"url":"r.example/hook"}`, 400, "absolute http or https URL"},
		{"subscribe", withToken, "PUT", "/v1/webhooks/ops?app=shop", ok, `{"url":"https://r.example/hook","secret":"k"}`, 204, ""},
		{"subscribe unsigned", withToken, "PUT", "/v1/webhooks/audit?app=shop", ok, `{"url":"http://a.example/"}`, 204, ""},
		{"list hides secrets", withToken, "GET", "/v1/webhooks?app=shop", ok, "", 200, `"signed": true`},
		{"unsubscribe", withToken, "DELETE", "/v1/webhooks/ops?app=shop", ok, "", 204, ""},
		{"list after", withToken, "GET", "/v1/webhooks?app=shop", ok, "", 200, `"name": "audit"`},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, tt.url, strings.NewReader(tt.body))
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		rec := httptest.NewRecorder()
		tt.h.ServeHTTP(rec, req)
		if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
			t.Errorf("%s: %s %s = %d %q, want %d containing %q", tt.name, tt.method, tt.url, rec.Code, rec.Body.String(), tt.wantStatus, tt.wantBody)
		}
		if strings.Contains(rec.Body.String(), `"k"`) || strings.Contains(rec.Body.String(), "secret\"") {
			t.Errorf("%s: answer %q shows a secret", tt.name, rec.Body.String())
		}
	}
	if got := hooks.subs["shop"]; len(got) != 1 || got[0] != (webhook.Subscription{Name: "audit", URL: "http://a.example/"}) {
		t.Errorf("kept subscriptions = %+v, want audit alone", got)
	}
}
