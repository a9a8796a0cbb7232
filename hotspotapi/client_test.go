package hotspotapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/rules"
)

// call is what the fake server saw of one request.
type call struct{ method, uri, auth, body string }

// fakeServer answers each "METHOD /path" with a status and a body, and
// records the calls.
func fakeServer(t *testing.T, answers map[string]struct {
	status int
	body   string
}) (*hotspotapi.Client, *[]call) {
	t.Helper()
	var calls []call
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls = append(calls, call{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), string(b)})
		a, ok := answers[r.Method+" "+r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	c, err := hotspotapi.NewClient(strings.TrimPrefix(srv.URL, "http://"), hotspotapi.ClientConfig{AdminToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

func TestClientCalls(t *testing.T) {
	ok := func(body string) struct {
		status int
		body   string
	} {
		return struct {
			status int
			body   string
		}{200, body}
	}
	c, calls := fakeServer(t, map[string]struct {
		status int
		body   string
	}{
		"GET /v1/hotkeys":      ok(`{"app":"shop","hotkeys":[{"key":"k","rate":2,"since":"s","source":"detected","rule":-1,"kind":"count","served_l1":0.5}]}`),
		"GET /v1/hotkeys/a b":  ok(`{"app":"shop","key":"a b","hot":false,"rate":1,"sources":[{"source":"w","share":1}],"effect":{"l1_hits":3}}`),
		"GET /v1/top":          ok(`{"app":"shop","keys":[{"key":"k","rate":9,"hot":true}]}`),
		"GET /v1/history":      ok(`{"app":"shop","events":[{"at":"2026-11-30T15:00:00Z","key":"k","kind":"promoted","rate":1,"rule":-1}],"truncated":true}`),
		"GET /v1/config":       ok(`{"threshold":1000,"topic":"t"}`),
		"PUT /v1/pins/x/y":     {204, ""},
		"GET /v1/rules":        ok(`{"app":"shop","version":2,"rules":[{"match":"exact","pattern":"a"}]}`),
		"PUT /v1/rules":        {400, `{"error":"rules: rule 1: empty pattern","rule":1}`},
		"DELETE /v1/rules":     {409, `{"error":"conflict"}`},
		"PUT /v1/webhooks/ops": {204, ""},
		"GET /metrics":         ok("# metrics\n"),
	})
	ctx := context.Background()
	hk, err := c.HotKeys(ctx, "shop")
	if err != nil || len(hk.HotKeys) != 1 || *hk.HotKeys[0].Rule != -1 || *hk.HotKeys[0].ServedL1 != 0.5 {
		t.Errorf("HotKeys = %+v, %v", hk, err)
	}
	st, err := c.Key(ctx, "shop", "a b")
	if err != nil || st.Key != "a b" || st.Sources[0].Source != "w" || st.Effect.L1Hits != 3 {
		t.Errorf("Key = %+v, %v", st, err)
	}
	if top, err := c.Top(ctx, "shop", 5); err != nil || top.Keys[0].Key != "k" {
		t.Errorf("Top = %+v, %v", top, err)
	}
	since := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	if h, err := c.History(ctx, hotspotapi.HistoryQuery{App: "shop", Key: "k", Since: since, Limit: 7}); err != nil || !h.Truncated || h.Events[0].Rule != -1 {
		t.Errorf("History = %+v, %v", h, err)
	}
	if cfg, err := c.Config(ctx); err != nil || cfg.Threshold != 1000 || cfg.Topic != "t" {
		t.Errorf("Config = %+v, %v", cfg, err)
	}
	if err := c.AddKey(ctx, hotspotapi.Pins, "shop", "x/y"); err != nil {
		t.Errorf("AddKey: %v", err)
	}
	if l, err := c.Rules(ctx, "shop"); err != nil || l.Version != 2 || len(l.Rules) != 1 {
		t.Errorf("Rules = %+v, %v", l, err)
	}
	_, err = c.PutRules(ctx, &rules.List{App: "shop", Version: 2, Rules: []rules.Rule{{Match: "exact", Pattern: "a"}}})
	if e, ok := errors.AsType[*hotspotapi.Error](err); !ok || e.Status != 400 || e.Rule == nil || *e.Rule != 1 || e.Message != "rules: rule 1: empty pattern" {
		t.Errorf("PutRules refused: %v, want an *Error with rule 1", err)
	}
	if e, ok := errors.AsType[*hotspotapi.Error](c.DeleteRules(ctx, "shop", 3)); !ok || e.Status != 409 || e.Rule != nil {
		t.Errorf("DeleteRules at another version: %v, want an *Error 409", e)
	}
	if err := c.PutWebhook(ctx, "shop", "ops", hotspotapi.WebhookBody{URL: "https://h"}); err != nil {
		t.Errorf("PutWebhook: %v", err)
	}
	if m, err := c.Metrics(ctx); err != nil || string(m) != "# metrics\n" {
		t.Errorf("Metrics = %q, %v", m, err)
	}
	want := []call{
		{"GET", "/v1/hotkeys?app=shop", "Bearer tok", ""},
		{"GET", "/v1/hotkeys/a%20b?app=shop", "Bearer tok", ""},
		{"GET", "/v1/top?app=shop&n=5", "Bearer tok", ""},
		{"GET", "/v1/history?app=shop&key=k&limit=7&since=2026-11-30T14%3A00%3A00Z", "Bearer tok", ""},
		{"GET", "/v1/config", "Bearer tok", ""},
		{"PUT", "/v1/pins/x%2Fy?app=shop", "Bearer tok", ""},
		{"GET", "/v1/rules?app=shop", "Bearer tok", ""},
		{"PUT", "/v1/rules?app=shop", "Bearer tok", `{"app":"shop","version":2,"rules":[{"match":"exact","pattern":"a"}]}`},
		{"DELETE", "/v1/rules?app=shop&version=3", "Bearer tok", ""},
		{"PUT", "/v1/webhooks/ops?app=shop", "Bearer tok", `{"url":"https://h"}`},
		{"GET", "/metrics", "Bearer tok", ""},
	}
	for i, w := range want {
		if i >= len(*calls) || (*calls)[i] != w {
			var got call
			if i < len(*calls) {
				got = (*calls)[i]
			}
			t.Errorf("call %d = %+v, want %+v", i, got, w)
		}
	}
}

func TestClientUnreachable(t *testing.T) {
	ln := httptest.NewServer(http.NotFoundHandler())
	addr := ln.Listener.Addr().String()
	ln.Close()
	c, err := hotspotapi.NewClient(addr, hotspotapi.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Config(context.Background()); !errors.Is(err, hotspotapi.ErrUnreachable) {
		t.Errorf("Config of a closed port: %v, want ErrUnreachable", err)
	}
	if _, err := hotspotapi.NewClient("ftp://x:1", hotspotapi.ClientConfig{}); err == nil {
		t.Error("NewClient(ftp://x:1): nil error, want one")
	}
	if c, err := hotspotapi.NewClient("https://x:1/", hotspotapi.ClientConfig{}); err != nil || c.Addr() != "https://x:1" {
		t.Errorf("NewClient(https://x:1/) = %v, %v", c.Addr(), err)
	}
}
