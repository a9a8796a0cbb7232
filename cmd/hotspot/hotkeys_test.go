package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/httpjson"
)

// TestHotkeysTable reads both answers of /v1/hotkeys (one app, every app)
// from a stand-in hotspotd and prints them as a table.
func TestHotkeysTable(t *testing.T) {
	rule := func(i int) *int { return &i }
	shop := hotspotapi.AppHotKeys{App: "shop", HotKeys: []hotspotapi.HotKey{
		{Key: "item:1", Rate: 2500, Since: "bad time", Source: "detected", Rule: rule(-1), Kind: "count"},
		{Key: "blob:9", Rate: 1 << 20, Since: "bad time", Source: "detected", Rule: rule(4), Kind: "bytes"},
		{Key: "ctr:1", Rate: 300, Since: "bad time", Source: "detected", Rule: rule(0), Kind: "write"},
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("app") {
			httpjson.Indent(w, http.StatusOK, shop)
			return
		}
		httpjson.Indent(w, http.StatusOK, hotspotapi.AllHotKeys{Apps: []hotspotapi.AppHotKeys{shop, {App: "web", HotKeys: []hotspotapi.HotKey{{Key: "p", Rate: 1000, Source: "pinned"}}}}})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--app", "shop"}, []string{
			"APP   KEY     RATE/S   SINCE     SOURCE    RULE     KIND",
			"shop  item:1  2500     bad time  detected  default  count",
			"shop  blob:9  1048576  bad time  detected  4        bytes",
			"shop  ctr:1   300      bad time  detected  0        write",
			"3 hot keys"}},
		{nil, []string{"shop  item:1  2500", "web   p       1000", "pinned    -        count", "4 hot keys"}},
	} {
		var out bytes.Buffer
		if err := hotkeys(t.Context(), append([]string{"--hotspotd", addr}, tc.args...), func(string) string { return "" }, &out, io.Discard); err != nil {
			t.Fatalf("hotkeys %q: %v", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("hotkeys %q printed\n%s\nwant a line with %q", tc.args, out.String(), w)
			}
		}
	}
}
