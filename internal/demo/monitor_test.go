package demo

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/hotspotapi"
)

func TestThousands(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {0.4, "0"}, {999, "999"}, {999.5, "1,000"}, {1000, "1,000"}, {93.04, "93"},
		{123456, "123,456"}, {1234567.4, "1,234,567"}, {-1234, "-1,234"}, {-0.2, "0"},
	} {
		if got := thousands(tc.v); got != tc.want {
			t.Errorf("thousands(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestTableColumns checks that every row of the live table keeps the
// header's columns, however wide its numbers grow.
func TestTableColumns(t *testing.T) {
	header := tableHeader()
	var ends []int // where each numeric column of the header ends
	for _, name := range []string{"time", "app gets/s", "L1 hit", "Redis reads/s", "source reads/s"} {
		ends = append(ends, strings.Index(header, name)+len(name))
	}
	hotAt := strings.Index(header, "hot keys")
	for _, s := range []sample{
		{at: time.Second},
		{at: 9 * time.Second, gets: 335, l1Hits: 300, redis: 35, source: 3, hot: []string{"item:42 (3000/s)"}},
		{at: 59 * time.Minute, gets: 2_500_000, l1Hits: 2_400_000, redis: 93_000, source: 12_345},
		{at: 10 * time.Minute, gets: 9_999_999_999, l1Hits: 9_999_999_999, redis: 1e9, source: 1e9, hot: []string{"a (1/s)", "b (2/s)"}},
	} {
		row := tableRow(s)
		for i, end := range ends {
			if end > len(row) || row[end-1] == ' ' || (end < len(row) && row[end] != ' ') {
				t.Errorf("column %d of %q does not end at %d, where the header's does:\n%s\n%s", i, row, end, header, row)
			}
		}
		if hot := strings.Join(s.hot, " "); len(row) < hotAt || row[hotAt:] != hot {
			t.Errorf("hot keys of %q do not start at %d:\n%s\n%s", row, hotAt, header, row)
		}
	}
}

func TestServedOf(t *testing.T) {
	body := `{"app":"shop","hotkeys":[
		{"key":"item:42","rate":3000,"since":"2026-12-01T10:00:00Z","source":"detected","kind":"count","served_l1":0.97},
		{"key":"item:7","rate":1500,"since":"2026-12-01T10:00:05Z","source":"detected","kind":"count"},
		{"key":"item:9","rate":900,"kind":"count","served_l1":0}]}`
	var a hotspotapi.AppHotKeys
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatal(err)
	}
	want := []servedL1{
		{key: "item:42", rate: 3000, fraction: 0.97, reported: true},
		{key: "item:7", rate: 1500},
		{key: "item:9", rate: 900, reported: true},
	}
	if got := servedOf(a); !slices.Equal(got, want) {
		t.Errorf("servedOf = %+v, want %+v", got, want)
	}
}

func TestMonitorFlashServed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/hotkeys" || r.URL.Query().Get("app") != "shop" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"app":"shop","hotkeys":[{"key":"item:42","rate":3000,"served_l1":0.5},{"key":"other","rate":9000,"served_l1":0.1}]}`)
	}))
	defer srv.Close()
	c, err := hotspotapi.NewClient(srv.URL, hotspotapi.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m := &monitor{hotspotd: c, app: "shop", flashKeys: []string{"item:42", "item:7"}}
	got := m.flashServed(t.Context())
	if want := []servedL1{{key: "item:42", rate: 3000, fraction: 0.5, reported: true}}; !slices.Equal(got, want) {
		t.Errorf("flashServed = %+v, want %+v (flash keys only)", got, want)
	}
	if m.hotspotd, err = hotspotapi.NewClient("127.0.0.1:1", hotspotapi.ClientConfig{}); err != nil { // nothing answers
		t.Fatal(err)
	}
	if got := m.flashServed(t.Context()); got != nil {
		t.Errorf("flashServed without hotspotd = %+v, want nil", got)
	}
}

func TestPrintFlashServed(t *testing.T) {
	flashAt := 20 * time.Second
	tests := []struct {
		name    string
		samples []sample
		want    string
	}{
		{"weighted by rate", []sample{
			{at: 19 * time.Second, flash: []servedL1{{key: "item:42", rate: 1000, fraction: 0, reported: true}}}, // before the flash
			{at: 21 * time.Second, flash: []servedL1{{key: "item:42", rate: 3000, fraction: 1, reported: true}}},
			{at: 22 * time.Second, flash: []servedL1{
				{key: "item:42", rate: 3000, fraction: 0.9, reported: true},
				{key: "item:7", rate: 1500, fraction: 0.6, reported: true},
				{key: "item:9", rate: 1500}, // not reported: left out
			}},
		}, "flash keys: 88.0% of their reads served from app memory (cluster-reported served_l1, mean over the flash weighted by rate, 3 key-seconds)\n"},
		{"not reported", []sample{
			{at: 21 * time.Second, flash: []servedL1{{key: "item:42", rate: 3000}}},
			{at: 22 * time.Second},
		}, "flash keys: share of their reads served from app memory not reported (hotspotd gives no served_l1)\n"},
		{"no sample", nil, "flash keys: share of their reads served from app memory not reported (hotspotd gives no served_l1)\n"},
	}
	for _, tt := range tests {
		var b strings.Builder
		printFlashServed(&b, flashAt, tt.samples)
		if b.String() != tt.want {
			t.Errorf("%s: printed %q, want %q", tt.name, b.String(), tt.want)
		}
	}
}
