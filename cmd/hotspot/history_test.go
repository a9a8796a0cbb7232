package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHistoryCommand(t *testing.T) {
	now := time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)
	var gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery = r.URL.RawQuery
		if r.URL.Path != "/v1/history" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"app":"shop","events":[
 {"at":"2026-11-30T15:59:00Z","key":"b","kind":"promoted","rate":2000,"rule":-1},
 {"at":"2026-11-30T15:58:00Z","key":"a","kind":"demoted","rate":100,"rule":-1},
 {"at":"2026-11-30T15:50:00Z","key":"a","kind":"promoted","rate":1500,"rule":-1},
 {"at":"2026-11-30T15:40:00Z","key":"c","kind":"demoted","rate":0,"rule":-1}]}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	env := func(string) string { return "" }

	var out bytes.Buffer
	if err := historyCmd(context.Background(), []string{"--hotspotd", addr, "--app", "shop", "--since", "1h", "--limit", "10"}, env, &out, now); err != nil {
		t.Fatal(err)
	}
	if want := "app=shop&limit=10&since=2026-11-30T15%3A00%3A00Z"; gotQuery != want {
		t.Errorf("query = %q, want %q", gotQuery, want)
	}
	text := out.String()
	for _, want := range []string{"4 events of app shop", "promoted  b", "demoted   a"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// Timeline, oldest first: c (hot before the window), a (8m), b (still hot, 1m).
	tl := text[strings.Index(text, "Timeline"):]
	ic, ia, ib := strings.Index(tl, "\nc "), strings.Index(tl, "\na "), strings.Index(tl, "\nb ")
	if ic < 0 || ia < ic || ib < ia || !strings.Contains(tl, "8m0s") || !strings.Contains(strings.Join(strings.Fields(tl), " "), "(still hot) 1m0s") || !strings.Contains(tl, "(before)") {
		t.Errorf("timeline:\n%s", tl)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--hotspotd", addr}, "--app is required"},
		{[]string{"--hotspotd", addr, "--app", "shop", "--since", "yesterday"}, "neither an RFC 3339 time nor a duration"},
		{[]string{"--hotspotd", addr, "--app", "shop", "--limit", "0"}, "--limit 0"},
	} {
		err := historyCmd(context.Background(), tc.args, env, &out, now)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("hotspot history %q = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
