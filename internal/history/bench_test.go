package history_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/hotset/decision"
	"github.com/hotspot-dev/hotspot/internal/history"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/httpapi"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// BenchmarkWrite measures the cost of storing promotions through the real
// Redis: one event per round trip (a shard deciding one promotion at a
// time) and 100 per pipelined round trip (a burst). ns/op is per event.
func BenchmarkWrite(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, _ := newStore(b, history.Config{})
			ctx := context.Background()
			ds := make([]decision.Decision, batch)
			for i := range ds {
				ds[i] = decision.Decision{App: "shop", Key: "item:" + strconv.Itoa(i), Kind: decision.Promoted,
					At: time.Now(), Rate: 1234.5, Rule: -1}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				if err := s.Write(ctx, ds[:min(batch, b.N-i)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchStream is the app whose stream holds 1 M events for BenchmarkRead.
// It is kept between runs (filling takes a while) under its own prefix;
// HOTSPOT_BENCH_CLEAN=1 deletes it afterwards.
const benchPrefix, benchApp, benchEvents = "hotspot:bench:history/", "bench", 1_000_000

var fillOnce sync.Once

// fill writes benchEvents events, one every 10 ms of "at" ending now, each
// key k0..k999 in turn, unless the stream has them already. The entries get
// the IDs Run would have given them (the "at" time): the stream looks like
// 2.8 hours of history, not like one bulk load.
func fill(b *testing.B, s *history.Store, rdb *redis.Client) {
	fillOnce.Do(func() {
		ctx := context.Background()
		stream := s.Stream(benchApp)
		if rdb.XLen(ctx, stream).Val() >= benchEvents && rdb.XLen(ctx, s.KeyStream(benchApp, "k7")).Val() >= 1000 {
			return
		}
		clean(rdb)
		start := time.Now()
		end := time.Now().Truncate(time.Millisecond)
		pipe := rdb.Pipeline()
		for i := range benchEvents {
			kind := decision.Promoted
			if (i/1000)%2 == 1 {
				kind = decision.Demoted
			}
			at := end.Add(-time.Duration(benchEvents-i) * 10 * time.Millisecond).UnixMilli()
			key := "k" + strconv.Itoa(i%1000)
			values := []any{"v", "1", "at", at, "key", key, "kind", kind, "rate", "1500", "rule", -1}
			id := strconv.FormatInt(at, 10) + "-0"
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: id, Values: values})
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: s.KeyStream(benchApp, key), ID: id, Values: values})
			if pipe.Len() >= 10_000 {
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		mem, _ := rdb.MemoryUsage(ctx, stream, 0).Result()
		kmem, _ := rdb.MemoryUsage(ctx, s.KeyStream(benchApp, "k7"), 0).Result()
		b.Logf("filled %d events in %v; the app's stream uses %d bytes (%.1f per event), a key's index of 1000 events %d bytes (%.1f per event)",
			benchEvents, time.Since(start), mem, float64(mem)/benchEvents, kmem, float64(kmem)/1000)
	})
}

// clean deletes the benchmark's streams.
func clean(rdb *redis.Client) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, benchPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

// BenchmarkRead measures GET /v1/history over HTTP (httpapi's handler on a
// loopback server, the real Redis) with 1 M events of one app stored, and
// reports the p50 and p99 latency of each query.
func BenchmarkRead(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: stacktest.Redis(b)})
	defer rdb.Close()
	s, err := history.New(rdb, history.Config{Prefix: benchPrefix, MaxLen: 2 * benchEvents, MaxScan: 100_000})
	if err != nil {
		b.Fatal(err)
	}
	fill(b, s, rdb)
	if os.Getenv("HOTSPOT_BENCH_CLEAN") == "1" {
		b.Cleanup(func() { clean(rdb) })
	}
	h, err := httpapi.New(httpapi.Config{HotSet: func() *hotwatch.Snapshot { return nil }, Aggregators: noAggregators{}, History: s})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	// The events span 10^4 s (2.8 h) up to the fill time.
	var newest time.Time
	if msgs, _ := rdb.XRevRangeN(context.Background(), s.Stream(benchApp), "+", "-", 1).Result(); len(msgs) == 1 {
		ms, _ := strconv.ParseInt(msgs[0].Values["at"].(string), 10, 64)
		newest = time.UnixMilli(ms)
	}
	mid := newest.Add(-5000 * time.Second)
	rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	queries := []struct{ name, q string }{
		{"newest_100", "limit=100"},
		{"newest_1000", "limit=1000"},
		{"range_1h_ago_100", "since=" + rfc(mid) + "&until=" + rfc(mid.Add(time.Hour)) + "&limit=100"},
		{"key_100", "key=k7&limit=100"}, // 1 in 1000 events
		{"key_range_1h", "key=k7&since=" + rfc(mid) + "&until=" + rfc(mid.Add(time.Hour)) + "&limit=100"},
		{"key_absent", "key=nope&limit=100"},
	}
	client := &http.Client{}
	for _, q := range queries {
		b.Run(q.name, func(b *testing.B) {
			u := srv.URL + "/v1/history?app=" + url.QueryEscape(benchApp) + "&" + q.q
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				start := time.Now()
				resp, err := client.Get(u)
				if err != nil {
					b.Fatal(err)
				}
				var buf [32 << 10]byte
				for {
					if _, err := resp.Body.Read(buf[:]); err != nil {
						break
					}
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET %s: %s", u, resp.Status)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// noAggregators answers the API's aggregator calls with nothing: the
// benchmark reads the history alone.
type noAggregators struct{}

func (noAggregators) Top(context.Context, string, int) ([]shardapi.KeyState, error) { return nil, nil }
func (noAggregators) Effects(context.Context, string) ([]shardapi.KeyEffectRates, error) {
	return nil, nil
}
func (noAggregators) Instances(context.Context, string) ([]shardapi.InstanceEffectRates, error) {
	return nil, nil
}
func (noAggregators) Key(context.Context, string, string) (shardapi.KeyState, bool, error) {
	return shardapi.KeyState{}, false, nil
}
