package httpsource

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hotspot-dev/hotspot/hotcache"
)

func TestLoader(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/item/42":
			w.Write([]byte("v42"))
		case "/item/a%2Fb":
			w.Write([]byte("vab"))
		case "/item/gone":
			http.NotFound(w, r)
		default:
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	l := &Loader{Template: srv.URL + "/item/{id}"}
	if v, err := l.Load(t.Context(), "item:42"); err != nil || string(v) != "v42" {
		t.Errorf("Load(item:42) = %q, %v", v, err)
	}
	if v, err := l.Load(t.Context(), "item:a/b"); err != nil || string(v) != "vab" {
		t.Errorf("Load(item:a/b) = %q, %v; want the id path-escaped", v, err)
	}
	if _, err := l.Load(t.Context(), "item:gone"); !errors.Is(err, hotcache.ErrNotFound) {
		t.Errorf("Load of a 404: %v, want ErrNotFound", err)
	}
	if _, err := l.Load(t.Context(), "item:x"); err == nil || errors.Is(err, hotcache.ErrNotFound) {
		t.Errorf("Load of a 500: %v, want another error", err)
	}
	if got := (&Loader{Template: "http://h/{key}"}).URL("a b:c"); got != "http://h/a%20b:c" {
		t.Errorf("URL = %q", got)
	}
}
