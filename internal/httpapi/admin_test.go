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
	"github.com/hotspot-dev/hotspot/shardapi"
)

// fakeLists keeps pins and blocks in memory.
type fakeLists struct {
	mu    sync.Mutex
	lists map[string][]string // kind/app -> keys
}

func (f *fakeLists) List(_ context.Context, kind, app string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.lists[kind+"/"+app]), nil
}

func (f *fakeLists) Add(_ context.Context, kind, app, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.lists[kind+"/"+app], key) {
		f.lists[kind+"/"+app] = append(f.lists[kind+"/"+app], key)
	}
	return nil
}

func (f *fakeLists) Remove(_ context.Context, kind, app, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists[kind+"/"+app] = slices.DeleteFunc(f.lists[kind+"/"+app], func(k string) bool { return k == key })
	return nil
}

// noAggregators is a cluster without aggregator shards.
type noAggregators struct{}

func (noAggregators) Top(context.Context, string, int) ([]shardapi.KeyState, error) { return nil, nil }
func (noAggregators) Effects(context.Context, string) ([]shardapi.KeyEffectRates, error) {
	return nil, nil
}
func (noAggregators) Instances(context.Context, string) ([]shardapi.InstanceEffectRates, error) {
	return nil, nil
}
func (noAggregators) Key(context.Context, string, string) (shardapi.KeyState, bool, error) {
	return shardapi.KeyState{}, false, nil
}

func TestAdminRoutes(t *testing.T) {
	lists := &fakeLists{lists: map[string][]string{}}
	newAPI := func(token string) http.Handler {
		h, err := New(Config{
			HotSet:      func() *hotwatch.Snapshot { return nil },
			Aggregators: noAggregators{},
			Lists:       lists, AdminToken: token,
		})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	withToken, noToken := newAPI("s3cret"), newAPI("")
	tests := []struct {
		name       string
		h          http.Handler
		method     string
		url        string
		auth       string
		wantStatus int
		wantBody   string
	}{
		{"writes refused without a configured token", noToken, "PUT", "/v1/pins/item:1?app=shop", "Bearer s3cret", 403, "--admin-token"},
		{"no credentials", withToken, "PUT", "/v1/pins/item:1?app=shop", "", 401, "admin token"},
		{"wrong token", withToken, "PUT", "/v1/pins/item:1?app=shop", "Bearer nope", 401, "admin token"},
		{"pin", withToken, "PUT", "/v1/pins/item:1?app=shop", "Bearer s3cret", 204, ""},
		{"block", withToken, "PUT", "/v1/blocks/item:9?app=shop", "Bearer s3cret", 204, ""},
		{"app is required", withToken, "PUT", "/v1/pins/item:1", "Bearer s3cret", 400, "app is required"},
		{"list is public", noToken, "GET", "/v1/pins?app=shop", "", 200, `"item:1"`},
		{"blocks listed apart", noToken, "GET", "/v1/blocks?app=shop", "", 200, `"item:9"`},
		{"unpin", withToken, "DELETE", "/v1/pins/item:1?app=shop", "Bearer s3cret", 204, ""},
		{"list after unpin", noToken, "GET", "/v1/pins?app=shop", "", 200, `"keys": []`},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, tt.url, nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		rec := httptest.NewRecorder()
		tt.h.ServeHTTP(rec, req)
		if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
			t.Errorf("%s: %s %s = %d %q, want %d containing %q", tt.name, tt.method, tt.url, rec.Code, rec.Body.String(), tt.wantStatus, tt.wantBody)
		}
	}
}
