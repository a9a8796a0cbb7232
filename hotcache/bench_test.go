package hotcache

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
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

func withSink(s sink) Option { return func(o *options) { o.sink = s } }

func benchClient(b *testing.B, opts ...Option) *Client {
	c, err := New(context.Background(), append([]Option{WithApp("bench"),
		WithLoader(LoaderFunc(func(ctx context.Context, key string) ([]byte, error) { return []byte("v:" + key), nil }))},
		opts...)...)
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

// discardSink counts what the reporter would send to Kafka.
type discardSink struct{ records, bytes atomic.Int64 }

func (s *discardSink) send(_ context.Context, rec []byte) error {
	s.records.Add(1)
	s.bytes.Add(int64(len(rec)))
	return nil
}
func (s *discardSink) close() error { return nil }

// BenchmarkReportDistinctKeys counts accesses of ever-new keys (a key space
// of 4M, so nearly every access in a 100 ms interval is a new key) while the
// reporter flushes every 100 ms and encodes every batch: flat out, and paced
// at 1M distinct keys/s. It reports the heap the reporter retains (after a
// GC, with its table full), which must stay bounded whatever the key rate,
// and the peak heap above the start, garbage included (the GC lets garbage
// grow with the benchmark's own 4M keys).
func BenchmarkReportDistinctKeys(b *testing.B) {
	keys := make([]string, 4<<20)
	for i := range keys {
		keys[i] = "item:" + strconv.Itoa(i)
	}
	b.Run("max", func(b *testing.B) { benchReport(b, keys, 0) })
	b.Run("1M-per-s", func(b *testing.B) { benchReport(b, keys, 1e6) })
}

func benchReport(b *testing.B, keys []string, perSecond float64) {
	sink := &discardSink{}
	c := benchClient(b, withSink(sink)) // its reporter flushes every 100 ms into sink

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > base && ms.HeapAlloc-base > peak.Load() {
					peak.Store(ms.HeapAlloc - base)
				}
			}
		}
	}()
	b.ReportAllocs()
	start := time.Now()
	i := 0
	for b.Loop() {
		c.countCold(keys[i&(len(keys)-1)], 100)
		i++
		if perSecond > 0 && i%1000 == 0 {
			if ahead := time.Duration(float64(i)/perSecond*1e9) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	runtime.GC()
	runtime.ReadMemStats(&ms)
	retained := int64(ms.HeapAlloc) - int64(base)
	dropped := testCounter(b, c.m.reportDropped.WithLabelValues("full"))
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "keys/s")
	b.ReportMetric(float64(retained)/(1<<20), "retained-MiB")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(100*dropped/float64(b.N), "dropped-%")
	b.ReportMetric(float64(sink.bytes.Load())/elapsed.Seconds()/(1<<20), "report-MiB/s")
}
