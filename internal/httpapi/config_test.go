package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
)

func TestConfigRoute(t *testing.T) {
	for _, tc := range []struct {
		threshold float64
		topic     string
		want      string
	}{
		{1000, "hotspot.access", `{"threshold":1000,"topic":"hotspot.access"}`},
		{250, "", `{"threshold":250}`}, // no detector: no topic
	} {
		h, err := New(Config{
			HotSet:      func() *hotwatch.Snapshot { return nil },
			Aggregators: noAggregators{},
			Threshold:   tc.threshold, Topic: tc.topic,
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/config", nil))
		var v any
		err = json.Unmarshal(rec.Body.Bytes(), &v)
		if got, _ := json.Marshal(v); err != nil || rec.Code != http.StatusOK || string(got) != tc.want {
			t.Errorf("threshold %v, topic %q: GET /v1/config = %d %s, want 200 %s", tc.threshold, tc.topic, rec.Code, got, tc.want)
		}
	}
}
