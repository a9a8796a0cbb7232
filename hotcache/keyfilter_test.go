package hotcache

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/hotspot-dev/hotspot/hotcache/bloomfilter"
)

// setFilter is an exact KeyFilter of the SDK's own kind: a set.
type setFilter struct {
	mu   sync.Mutex // guards keys
	keys map[string]bool
}

func (f *setFilter) MayContain(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[key]
}

func (f *setFilter) Add(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[key] = true
}

// TestKeyFilter: with a KeyFilter of its own or the bits-and-blooms
// adapter, a key the filter rules out is not found without a Loader call,
// even when the source has it; a key the filter holds is loaded; a key Set
// through the Client is added to the filter, so it is found afterwards.
func TestKeyFilter(t *testing.T) {
	filters := []struct {
		name string
		make func(keys ...string) KeyFilter
	}{
		{"own set", func(keys ...string) KeyFilter {
			f := &setFilter{keys: map[string]bool{}}
			for _, k := range keys {
				f.Add(k)
			}
			return f
		}},
		{"bits-and-blooms", func(keys ...string) KeyFilter {
			f := bloom.NewWithEstimates(1000, 0.001)
			for _, k := range keys {
				f.AddString(k)
			}
			return bloomfilter.Wrap(f)
		}},
	}
	for _, ft := range filters {
		t.Run(ft.name, func(t *testing.T) {
			src := newSource("a", "1", "unlisted", "2")
			c := newClient(t, WithLoader(src), WithBloomFilter(ft.make("a")))
			ctx := context.Background()
			if got := get(t, c, "a"); got != "1" {
				t.Errorf(`Get("a") = %q, want 1`, got)
			}
			tests := []struct {
				key       string
				wantErr   error
				wantLoads int64
			}{
				{"a", nil, 1}, // no Redis: a cold key is loaded each time
				{"never", ErrNotFound, 0},
				{"unlisted", ErrNotFound, 0}, // the filter is believed: keep it complete
			}
			for _, tt := range tests {
				before := src.loads.Load()
				_, err := c.Get(ctx, tt.key)
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Get(%q): err = %v, want %v", tt.key, err, tt.wantErr)
				}
				if got := src.loads.Load() - before; got != tt.wantLoads {
					t.Errorf("Get(%q): %d loads, want %d", tt.key, got, tt.wantLoads)
				}
			}
			if err := c.Set(ctx, "b", []byte("3")); err != nil {
				t.Fatal(err)
			}
			if got := get(t, c, "b"); got != "3" {
				t.Errorf(`Get("b") after Set = %q, want 3`, got)
			}
		})
	}
}
