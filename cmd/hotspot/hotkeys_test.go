package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/httpapi"
	"github.com/hotspot-dev/hotspot/internal/httpjson"
)

// TestHotkeysTable reads both answers of /v1/hotkeys (one app, every app)
// from a stand-in hotspotd and prints them as a table.
func TestHotkeysTable(t *testing.T) {
	shop := httpapi.AppHotKeys{App: "shop", HotKeys: []httpapi.HotKey{{Key: "item:1", Rate: 2500, Since: "bad time", Source: "detected"}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("app") {
			httpjson.Indent(w, http.StatusOK, shop)
			return
		}
		httpjson.Indent(w, http.StatusOK, httpapi.AllHotKeys{Apps: []httpapi.AppHotKeys{shop, {App: "web", HotKeys: []httpapi.HotKey{{Key: "p", Rate: 1000, Source: "pinned"}}}}})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--app", "shop"}, []string{"shop  item:1  2500    bad time  detected", "1 hot keys"}},
		{nil, []string{"shop  item:1  2500", "web   p       1000", "pinned", "2 hot keys"}},
	} {
		var out bytes.Buffer
		if err := hotkeys(t.Context(), append([]string{"--addr", addr}, tc.args...), func(string) string { return "" }, &out, io.Discard); err != nil {
			t.Fatalf("hotkeys %q: %v", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("hotkeys %q printed\n%s\nwant a line with %q", tc.args, out.String(), w)
			}
		}
	}
}
