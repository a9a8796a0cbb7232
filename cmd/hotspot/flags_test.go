package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/httpjson"
)

// TestHotspotdFlag: every command that talks to hotspotd takes its address
// as --hotspotd, and still as --addr (or HOTSPOT_ADDR), the deprecated name
// some of them used.
func TestHotspotdFlag(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpjson.Indent(w, http.StatusOK, map[string]any{"apps": []any{}})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, name := range []string{"--hotspotd", "--addr"} {
		var out bytes.Buffer
		if err := hotkeys(t.Context(), []string{name, addr, "--topic", ""}, noEnv, &out, io.Discard); err != nil || !strings.Contains(out.String(), "0 hot keys") {
			t.Errorf("hotkeys %s: %v\n%s", name, err, out.String())
		}
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--hotspotd", "a:1,b:2"}, nil},
		{[]string{"--addr", "a:1,b:2"}, nil},
		{nil, map[string]string{"HOTSPOT_HOTSPOTD": "a:1,b:2"}},
		{nil, map[string]string{"HOTSPOT_ADDR": "a:1,b:2"}},
		{[]string{"--hotspotd", "a:1,b:2"}, map[string]string{"HOTSPOT_ADDR": "c:3"}},
	} {
		o, err := parseBenchFlags(append(tc.args, "--stack-dir", t.TempDir()), func(k string) string { return tc.env[k] }, io.Discard)
		if err != nil || !slices.Equal(o.hotspotds, []string{"a:1", "b:2"}) {
			t.Errorf("bench %q %v: hotspotds %q, %v; want [a:1 b:2]", tc.args, tc.env, o.hotspotds, err)
		}
	}
}
