package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(config) bool
		wantErr bool
	}{
		{"defaults", nil, nil, func(c config) bool {
			return c.app == "itemapp" && len(c.zk) == 1 && c.sourceLatency == 5*time.Millisecond
		}, false},
		{"env", nil, map[string]string{"ITEMAPP_APP": "shop", "ITEMAPP_REDIS": "a:1, b:2"}, func(c config) bool {
			return c.app == "shop" && len(c.redis) == 2 && c.redis[1] == "b:2"
		}, false},
		{"flag beats env", []string{"--app", "web"}, map[string]string{"ITEMAPP_APP": "shop"}, func(c config) bool {
			return c.app == "web"
		}, false},
		{"empty env counts as unset", nil, map[string]string{"ITEMAPP_ZK": ""}, func(c config) bool {
			return len(c.zk) == 1
		}, false},
		{"empty flag turns ZooKeeper off", []string{"--zk", ""}, nil, func(c config) bool {
			return len(c.zk) == 0
		}, false},
		{"bad latency", []string{"--source-latency", "fast"}, nil, nil, true},
		{"bad addr", []string{"--http-addr", "nope"}, nil, nil, true},
		{"stray argument", []string{"x"}, nil, nil, true},
	}
	for _, tt := range tests {
		getenv := func(k string) string { return tt.env[k] }
		c, err := parseConfig(tt.args, getenv)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v, want error %v", tt.name, err, tt.wantErr)
			continue
		}
		if err == nil && !tt.check(c) {
			t.Errorf("%s: got %+v", tt.name, c)
		}
	}
}

// startApp runs itemapp until the test ends and returns its base URL.
func startApp(t *testing.T, args ...string) string {
	t.Helper()
	cfg, err := parseConfig(append([]string{"--http-addr", "127.0.0.1:0", "--source-latency", "1ms"}, args...),
		func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run after shutdown: %v", err)
		}
	})
	return "http://" + addr
}

func do(t *testing.T, method, url, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestServe(t *testing.T) {
	base := startApp(t, "--zk", "", "--redis", "", "--brokers", "", "--items", "10")
	tests := []struct {
		method, path, body string
		wantCode           int
		wantBody           string
	}{
		{"GET", "/item/3", "", 200, `{"id":3,"name":"item 3"}`},
		{"GET", "/item/10", "", 404, "not found\n"},
		{"GET", "/item/abc", "", 404, "not found\n"},
		{"PUT", "/item/3", "new", 204, ""},
		{"GET", "/item/3", "", 200, "new"},
		{"DELETE", "/item/3", "", 204, ""},
		{"GET", "/item/3", "", 404, "not found\n"},
		{"GET", "/healthz", "", 200, "ok\n"},
	}
	for _, tt := range tests {
		code, body, _ := do(t, tt.method, base+tt.path, tt.body)
		if code != tt.wantCode || body != tt.wantBody {
			t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, code, body, tt.wantCode, tt.wantBody)
		}
	}
	_, body, _ := do(t, "GET", base+"/stats", "")
	var st struct {
		SourceReads int64 `json:"source_reads"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.SourceReads < 3 {
		t.Errorf("/stats = %s (%v), want source_reads >= 3", body, err)
	}
	_, metrics, _ := do(t, "GET", base+"/metrics", "")
	for _, name := range []string{"itemapp_source_reads_total", "hotspot_hotcache_l1_misses_total", "go_goroutines"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
