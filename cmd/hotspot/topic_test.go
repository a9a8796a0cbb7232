package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTopicMismatch: a hotspotd reading several topics (--input) consumes
// each of them.
func TestTopicMismatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"threshold":1000,"topic":"web.access,hotspot.access"}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, topic := range []string{"web.access", "hotspot.access"} {
		if m := topicMismatch(t.Context(), []string{addr}, topic); m != "" {
			t.Errorf("topic %s: %s", topic, m)
		}
	}
	if m := topicMismatch(t.Context(), []string{addr}, "web"); !strings.Contains(m, `"web.access,hotspot.access"`) {
		t.Errorf("topic web: %q, want a mismatch naming the topics consumed", m)
	}
}
