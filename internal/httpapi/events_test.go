package httpapi

import (
	"fmt"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
)

func TestEventsKeepsTheNewest(t *testing.T) {
	e := NewEvents(3)
	at := time.UnixMilli(1_700_000_000_000)
	for i := range 5 {
		e.Record(hotwatch.Change{App: "a", At: at, Added: []hotset.Key{{Key: fmt.Sprint(i), Rate: 1000}}})
	}
	e.Record(hotwatch.Change{App: "b", At: at, Removed: []string{"x"}})
	tests := []struct {
		app  string
		n    int
		want string
	}{
		{"", 10, "b/x/demoted a/4/promoted a/3/promoted"},
		{"a", 10, "a/4/promoted a/3/promoted"},
		{"a", 1, "a/4/promoted"},
		{"c", 10, ""},
	}
	for _, tt := range tests {
		var got string
		for i, ev := range e.Recent(tt.app, tt.n) {
			if i > 0 {
				got += " "
			}
			got += ev.App + "/" + ev.Key + "/" + ev.Kind
		}
		if got != tt.want {
			t.Errorf("Recent(%q, %d) = %q, want %q", tt.app, tt.n, got, tt.want)
		}
	}
}
