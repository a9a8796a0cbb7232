package httpapi

import (
	"slices"
	"sync"
	"time"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
)

// Events keeps the most recent promotions and demotions, newest last. Feed
// it from hotwatch.Config.OnChange. It is safe for concurrent use.
type Events struct {
	mu   sync.Mutex // guards ring and next
	ring []hotspotapi.Event
	next int // total events recorded; ring[next%len] is the oldest when full
}

// NewEvents returns an Events that keeps the last n.
func NewEvents(n int) *Events { return &Events{ring: make([]hotspotapi.Event, 0, max(n, 1))} }

// Record adds one hot-set change.
func (e *Events) Record(c hotwatch.Change) {
	at := c.At.UTC().Format(time.RFC3339Nano)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range c.Added {
		e.add(hotspotapi.Event{At: at, App: c.App, Key: k.Key, Kind: "promoted", Rate: k.Rate})
	}
	for _, k := range c.Removed {
		e.add(hotspotapi.Event{At: at, App: c.App, Key: k, Kind: "demoted"})
	}
}

func (e *Events) add(ev hotspotapi.Event) {
	if len(e.ring) < cap(e.ring) {
		e.ring = append(e.ring, ev)
	} else {
		e.ring[e.next%cap(e.ring)] = ev
	}
	e.next++
}

// Recent returns up to n events of app ("" for every app), newest first.
func (e *Events) Recent(app string, n int) []hotspotapi.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []hotspotapi.Event{}
	for i := e.next - 1; i >= max(0, e.next-len(e.ring)) && len(out) < n; i-- {
		if ev := e.ring[i%cap(e.ring)]; app == "" || ev.App == app {
			out = append(out, ev)
		}
	}
	return slices.Clip(out)
}
