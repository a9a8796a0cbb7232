package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestWarm warms the real Redis from an HTTP source, with keys from a file
// and from a hotspotd's /v1/top.
func TestWarm(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	prefix := stacktest.Name(t) + ":"
	var reads atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /item/{id}", func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		if r.PathValue("id") == "missing" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "value of %s", r.PathValue("id"))
	})
	mux.HandleFunc("GET /v1/top", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"app":"shop","keys":[{"key":"item:t1","rate":50,"hot":false},{"key":"item:t2","rate":40,"hot":false}]}`)
	})
	var historyQuery string
	mux.HandleFunc("GET /v1/history", func(w http.ResponseWriter, r *http.Request) {
		historyQuery = r.URL.RawQuery
		fmt.Fprint(w, `{"app":"shop","events":[`+
			`{"at":"2026-11-30T10:00:03Z","key":"item:h1","kind":"demoted","rate":10,"rule":-1},`+
			`{"at":"2026-11-30T10:00:02Z","key":"item:h2","kind":"promoted","rate":3000,"rule":-1},`+
			`{"at":"2026-11-30T10:00:01Z","key":"item:h1","kind":"promoted","rate":1200,"rule":-1}]}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})

	file := filepath.Join(t.TempDir(), "keys.txt")
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprint("item:", i))
	}
	lines = append(lines, "# a comment", "", "item:missing")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--app", "shop", "--redis", redisAddr, "--redis-prefix", prefix,
		"--source", srv.URL + "/item/{id}", "--rate", "1000"}
	var out bytes.Buffer
	if err := warm(t.Context(), append(common, "--keys", file), func(string) string { return "" }, &out); err != nil {
		t.Fatalf("warm --keys: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "0 already in Redis, 200 loaded, 1 not found, 0 failed") {
		t.Errorf("summary = %q, want 200 loaded and 1 not found", out.String())
	}
	if v, err := rdb.Get(context.Background(), prefix+"item:7").Result(); err != nil || v != "value of 7" {
		t.Errorf("item:7 in Redis = %q, %v; want %q", v, err, "value of 7")
	}
	// Again: everything is there, nothing is read.
	reads.Store(0)
	out.Reset()
	if err := warm(t.Context(), append(common, "--keys", file), func(string) string { return "" }, &out); err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 1 || !strings.Contains(out.String(), "200 already in Redis") {
		t.Errorf("second run: %d source reads, summary %q; want 1 (the missing key) and 200 already there", n, out.String())
	}

	out.Reset()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if err := warm(t.Context(), append(common, "--top", "2", "--hotspotd", addr), func(string) string { return "" }, &out); err != nil {
		t.Fatalf("warm --top: %v", err)
	}
	if v, _ := rdb.Get(context.Background(), prefix+"item:t2").Result(); v != "value of t2" {
		t.Errorf("item:t2 from --top in Redis = %q, want %q", v, "value of t2")
	}

	// --hot-since: the keys promoted in that span, from the history.
	out.Reset()
	if err := warm(t.Context(), append(common, "--hot-since", "24h", "--hotspotd", addr), func(string) string { return "" }, &out); err != nil {
		t.Fatalf("warm --hot-since: %v", err)
	}
	if !strings.Contains(historyQuery, "since=") || !strings.Contains(out.String(), "warming 2 keys") {
		t.Errorf("warm --hot-since asked /v1/history?%s and printed %q; want a since bound and 2 keys", historyQuery, out.String())
	}
	for _, k := range []string{"h1", "h2"} {
		if v, _ := rdb.Get(context.Background(), prefix+"item:"+k).Result(); v != "value of "+k {
			t.Errorf("item:%s from --hot-since in Redis = %q, want %q", k, v, "value of "+k)
		}
	}
	if got, err := hotSinceKeys(t.Context(), addr, "shop", time.Now().Add(-time.Hour)); err != nil || strings.Join(got, " ") != "item:h2 item:h1" {
		t.Errorf("hotSinceKeys = %q, %v; want item:h2 item:h1 (busiest first)", got, err)
	}

	for _, bad := range [][]string{
		{"--app", "shop", "--source", srv.URL + "/{key}"},                                    // neither --keys nor --top
		{"--app", "shop", "--source", srv.URL + "/{key}", "--top", "5", "--hot-since", "1h"}, // two sources of keys
		{"--app", "shop", "--source", srv.URL + "/{key}", "--hot-since", "-1h"},              // negative span
		{"--app", "shop", "--source", srv.URL, "--top", "5"},                                 // no placeholder
		{"--source", srv.URL + "/{key}", "--top", "5"},                                       // no app
		{"--app", "shop", "--source", srv.URL + "/{key}", "--top", "5", "--keys", file},      // both
		{"--app", "shop", "--source", srv.URL + "/{key}", "--top", "5", "--rate", "0"},       // rate
		{"--app", "shop", "--source", srv.URL + "/{key}", "--top", "5000"},                   // top too big
	} {
		if err := warm(t.Context(), bad, func(string) string { return "" }, &out); !errors.As(err, new(usageError)) {
			t.Errorf("warm %q: %v, want a usage error", bad, err)
		}
	}
}
