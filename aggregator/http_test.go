package aggregator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/shardapi"
)

func partials(groups ...wire.PartialGroup) []byte {
	return wire.AppendPartials(nil, &wire.PartialBatch{Source: "d1", At: 1, Groups: groups})
}

func TestHandler(t *testing.T) {
	a := mustNew(t, Config{MaxBodyBytes: 1024}, &fakePub{})
	h := a.Handler()
	good := partials(
		wire.PartialGroup{App: "app", Entries: []wire.KeyCount{{Key: "a", Count: 1500}, {Key: "b", Count: 7}, {Key: "a", Count: 5}}},
		wire.PartialGroup{App: "default", Entries: []wire.KeyCount{{Key: "x", Count: 3}}},
	)
	truncated := good[:len(good)-1]
	tests := []struct {
		name     string
		method   string
		target   string
		body     []byte
		code     int
		contains string
	}{
		{"bad body counts nothing", "POST", shardapi.PartialsPath, truncated, 400, `"error":`},
		{"not a batch", "POST", shardapi.PartialsPath, []byte(`{"key":"a"}`), 400, `"error":`},
		{"over the size cap", "POST", shardapi.PartialsPath, bytes.Repeat([]byte{0xA6}, 2000), 413, `"error":"body over 1024 bytes"`},
		{"good body", "POST", shardapi.PartialsPath, good, 204, ""},
		{"form content type", "POST", shardapi.PartialsPath + "?ct=form", good, 415, `"error":"Content-Type must be application/octet-stream"`},
		{"text content type", "POST", shardapi.PartialsPath + "?ct=text", good, 415, `"error":`},
		{"wrong method", "GET", shardapi.PartialsPath, nil, 405, ""},
		{"top", "GET", shardapi.TopPath + "?app=app&n=1", nil, 200, `"keys":[{"app":"app","key":"a","rate":1505,"hot":true,"since":`},
		{"top of the default app", "GET", shardapi.TopPath, nil, 200, `"keys":[{"app":"default","key":"x","rate":3,"hot":false,"rule":-1,"kind":"count"}]`},
		{"bad n", "GET", shardapi.TopPath + "?n=x", nil, 400, `"error":`},
		{"key", "GET", shardapi.KeyPath + "?app=app&key=b", nil, 200, `{"app":"app","key":"b","rate":7,"hot":false,"rule":-1,"kind":"count"}`},
		{"untracked key", "GET", shardapi.KeyPath + "?app=app&key=zz", nil, 404, `"error":`},
		{"missing key", "GET", shardapi.KeyPath + "?app=app", nil, 400, `"error":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "top" || strings.HasPrefix(tt.name, "top of") {
				a.t.sweep(time.Now())
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tt.method, tt.target, bytes.NewReader(tt.body))
			switch {
			case strings.HasSuffix(tt.target, "ct=form"):
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			case strings.HasSuffix(tt.target, "ct=text"):
				req.Header.Set("Content-Type", "text/plain")
			case tt.method == "POST":
				req.Header.Set("Content-Type", "application/octet-stream")
			}
			h.ServeHTTP(rec, req)
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.contains) {
				t.Errorf("%s %s = %d %s, want %d containing %s", tt.method, tt.target, rec.Code, rec.Body, tt.code, tt.contains)
			}
			if tt.code >= 400 && tt.contains != "" {
				var e struct{ Error string }
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
					t.Errorf("error body %q is not {\"error\": ...}: %v", rec.Body, err)
				}
			}
		})
	}
	if n := len(a.t.entries); n != 3 {
		t.Errorf("tracked %d keys after one good body, want 3 (bad bodies count nothing)", n)
	}
}

func BenchmarkApplyPartials(b *testing.B) {
	a, err := New(Config{ID: "s1", Addr: "x:1"}, &fakePub{})
	if err != nil {
		b.Fatal(err)
	}
	g := wire.PartialGroup{App: "app"}
	for i := range 1000 {
		g.Entries = append(g.Entries, wire.KeyCount{Key: "item:" + strings.Repeat("x", i%20) + string(rune('a'+i%26)) + strconv.Itoa(i), Count: uint64(1 + i%50)})
	}
	body := partials(g)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	h := a.Handler()
	for b.Loop() {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, shardapi.PartialsPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/octet-stream")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent {
			b.Fatalf("code %d: %s", rec.Code, rec.Body)
		}
	}
	b.ReportMetric(float64(len(g.Entries)), "entries/op")
}
