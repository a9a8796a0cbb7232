package hotcache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// limitedSource is a source of truth that checks its own limit: every Load
// must conform to a token bucket of the limit (with 5% more burst for calls
// that arrive a little later than they were allowed), and it records when
// each Load came.
type limitedSource struct {
	*source
	bucket *rate.Limiter
	over   atomic.Int64
	mu     sync.Mutex // guards at
	at     []time.Time
}

func newLimitedSource(src *source, limit float64) *limitedSource {
	return &limitedSource{source: src, bucket: rate.NewLimiter(rate.Limit(limit), int(limit*1.05))}
}

func (s *limitedSource) Load(ctx context.Context, key string) ([]byte, error) {
	if !s.bucket.Allow() {
		s.over.Add(1)
	}
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	return s.source.Load(ctx, key)
}

// busiestSecond returns the most Loads in any one-second span.
func (s *limitedSource) busiestSecond() int {
	s.mu.Lock()
	at := slices.Clone(s.at)
	s.mu.Unlock()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	most, j := 0, 0
	for i := range at {
		for at[i].Sub(at[j]) >= time.Second {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// TestWarmWithLiveTraffic warms 10,000 keys while live misses load other
// keys, and checks that the source never sees more than its limit.
func TestWarmWithLiveTraffic(t *testing.T) {
	redisAddr := stacktest.Redis(t)
	const limit, warmKeys, liveKeys = 1000, 10_000, 50_000
	base := newSource()
	var keys []string
	for i := range warmKeys {
		k := fmt.Sprint("w:", i)
		base.data[k] = []byte("v" + k)
		keys = append(keys, k)
	}
	for i := range liveKeys {
		base.data[fmt.Sprint("l:", i)] = []byte("live")
	}
	keys = append(keys, "w:missing")
	src := newLimitedSource(base, limit)
	prefix := stacktest.Name(t) + ":"
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	t.Cleanup(func() {
		var cursor uint64
		for {
			ks, next, err := rdb.Scan(context.Background(), cursor, prefix+"*", 1000).Result()
			if err != nil {
				return
			}
			if len(ks) > 0 {
				rdb.Unlink(context.Background(), ks...)
			}
			if cursor = next; cursor == 0 {
				return
			}
		}
	})
	// One key is in Redis already: Warm leaves it alone.
	if err := rdb.Set(context.Background(), prefix+"w:0", "v0-in-redis", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// Warm may take three quarters of the Loader limit: live misses keep the
	// rest, and each alone could exceed the limit if Warm did not draw from
	// the shared bucket (Warm at 750/s plus live misses at up to 1000/s).
	c := newClient(t, WithRedis(redisAddr), WithRedisKeyPrefix(prefix), WithLoader(src), WithLoaderLimit(limit),
		WithWarmLimit(limit*3/4), WithTimeout(time.Second)) // a busy shared machine can stall Redis

	ctx, stopLive := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var live, throttled, unavailable atomic.Int64
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := c.Get(ctx, fmt.Sprint("l:", rand.N(liveKeys)))
				switch {
				case err == nil:
					live.Add(1)
				case errors.Is(err, ErrThrottled):
					throttled.Add(1)
					time.Sleep(time.Millisecond)
				case errors.Is(err, ErrUnavailable):
					unavailable.Add(1) // a slow shared Redis: not what this test is about
					time.Sleep(time.Millisecond)
				case ctx.Err() == nil:
					t.Errorf("live Get: %v", err)
				}
			}
		})
	}
	start := time.Now()
	st, err := c.Warm(context.Background(), keys)
	took := time.Since(start)
	stopLive()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Warm of %d keys in %v: %+v; live: %d Gets served, %d throttled, %d unavailable; source: busiest second %d loads, %d over its limit",
		len(keys), took, st, live.Load(), throttled.Load(), unavailable.Load(), src.busiestSecond(), src.over.Load())
	if want := (WarmStats{Present: 1, Loaded: warmKeys - 1, NotFound: 1}); st != want {
		t.Errorf("Warm stats = %+v, want %+v", st, want)
	}
	if n := src.over.Load(); n > 0 {
		t.Errorf("the source saw %d loads over its limit of %d/s", n, limit)
	}
	// A bucket of one second's burst: any one second holds at most burst + rate.
	if n := src.busiestSecond(); n > 2*limit*105/100 {
		t.Errorf("busiest second at the source: %d loads, want <= %d", n, 2*limit*105/100)
	}
	// Warm's own bucket holds a batch (100): the rest comes at its limit.
	if min := time.Duration(float64(warmKeys-1-100) / (limit * 3 / 4) * 0.9 * float64(time.Second)); took < min {
		t.Errorf("Warm took %v, want >= %v (its own limit)", took, min)
	}
	if live.Load() == 0 {
		t.Error("no live Get was served during Warm")
	}
	cmds, err := rdb.Pipelined(context.Background(), func(p redis.Pipeliner) error {
		for _, k := range keys[:warmKeys] {
			p.Exists(context.Background(), prefix+k)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for _, cmd := range cmds {
		if cmd.(*redis.IntCmd).Val() == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d warmed keys are not in Redis", missing)
	}
	if v, _ := rdb.Get(context.Background(), prefix+"w:0").Result(); v != "v0-in-redis" {
		t.Errorf("w:0 in Redis = %q, want the value that was there (Warm leaves present keys alone)", v)
	}
}

// TestTopKeys reads /v1/top's answer.
func TestTopKeys(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/top" || r.URL.Query().Get("app") != "shop" || r.URL.Query().Get("n") != "2" {
			http.Error(w, "bad request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"app":"shop","keys":[{"key":"item:1","rate":900,"hot":false},{"key":"item:2","rate":5,"hot":false}]}`)
	}))
	defer srv.Close()
	got, err := TopKeys(context.Background(), srv.Listener.Addr().String(), "shop", 2)
	if err != nil || !slices.Equal(got, []string{"item:1", "item:2"}) {
		t.Errorf("TopKeys = %v, %v; want [item:1 item:2]", got, err)
	}
	if _, err := TopKeys(context.Background(), srv.URL, "shop", 0); err == nil {
		t.Error("TopKeys n=0: nil error, want one")
	}
}
