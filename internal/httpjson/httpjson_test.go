package httpjson

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWrite(t *testing.T) {
	v := map[string]any{"keys": []string{}}
	tests := []struct {
		name   string
		write  func(http.ResponseWriter)
		status int
		body   string
	}{
		{"compact", func(w http.ResponseWriter) { Write(w, 200, v) }, 200, "{\"keys\":[]}\n"},
		{"indented", func(w http.ResponseWriter) { Indent(w, 201, v) }, 201, "{\n  \"keys\": []\n}\n"},
		{"error", func(w http.ResponseWriter) { Error(w, 400, `bad "n"`) }, 400, "{\"error\":\"bad \\\"n\\\"\"}\n"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		tt.write(rec)
		if rec.Code != tt.status || rec.Body.String() != tt.body || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: got %d %q (%s), want %d %q (application/json)", tt.name,
				rec.Code, rec.Body.String(), rec.Header().Get("Content-Type"), tt.status, tt.body)
		}
	}
}
