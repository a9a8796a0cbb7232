package hotwatch

import (
	"cmp"
	"maps"
	"slices"

	"github.com/hotspot-dev/hotspot/hotset"
)

// Snapshot is the hot set at one moment. It is immutable: the Watcher
// publishes a new one on every change and never modifies an old one.
type Snapshot struct {
	apps map[string]map[string]hotset.Key // app -> key -> merged key; never modified once published
}

var empty = &Snapshot{apps: map[string]map[string]hotset.Key{}}

// Key returns key's merged state in app and whether it is hot.
func (s *Snapshot) Key(app, key string) (hotset.Key, bool) {
	k, ok := s.apps[app][key]
	return k, ok
}

// Apps returns the apps that have at least one hot key, sorted.
func (s *Snapshot) Apps() []string {
	return slices.Sorted(maps.Keys(s.apps))
}

// App returns a copy of app's hot keys sorted by rate, descending, then by key.
func (s *Snapshot) App(app string) []hotset.Key {
	m := s.apps[app]
	out := make([]hotset.Key, 0, len(m))
	for _, k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b hotset.Key) int {
		if c := cmp.Compare(b.Rate, a.Rate); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}

// with returns a copy of s in which app's keys are m (removed when empty).
// The per-app maps are shared, not copied: they are immutable too.
func (s *Snapshot) with(app string, m map[string]hotset.Key) *Snapshot {
	n := &Snapshot{apps: make(map[string]map[string]hotset.Key, len(s.apps)+1)}
	for a, km := range s.apps {
		if a != app {
			n.apps[a] = km
		}
	}
	if len(m) > 0 {
		n.apps[app] = m
	}
	return n
}
