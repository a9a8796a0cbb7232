package hotcache

import (
	"context"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotset"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
)

func hotKeys(keys ...string) []hotset.Key {
	var out []hotset.Key
	for _, k := range keys {
		out = append(out, hotset.Key{Key: k, Rate: 5000})
	}
	return out
}

// promote makes keys hot in c as a ZooKeeper change would, and waits until
// each is served from L1.
func promote(tb testing.TB, c *Client, keys ...string) {
	tb.Helper()
	c.onChange(hotwatch.Change{App: c.o.app, Added: hotKeys(keys...), At: time.Now()})
	deadline := time.Now().Add(5 * time.Second)
	for _, k := range keys {
		for {
			e := c.hot.Load().m[k]
			if e != nil && e.val.Load() != nil {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("key %q not in L1 5s after promotion", k)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func benchClient(b *testing.B) *Client {
	c, err := New(context.Background(), WithApp("bench"),
		WithLoader(LoaderFunc(func(ctx context.Context, key string) ([]byte, error) { return []byte("v:" + key), nil })))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	promote(b, c, "item:42")
	return c
}

// BenchmarkGetHot is a Get of a promoted key, access reporting included.
func BenchmarkGetHot(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get(ctx, "item:42"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetHotParallel runs BenchmarkGetHot's Get on every P (-cpu 2).
func BenchmarkGetHotParallel(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Get(ctx, "item:42"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
