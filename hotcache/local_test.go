package hotcache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestLocalProtection reads one cold key hard from one instance, with local
// protection off and on, and counts the GETs the private Redis served.
func TestLocalProtection(t *testing.T) {
	rs := stacktest.StartRedisServer(t)
	storm := func(c *Client, d time.Duration) int {
		var wg sync.WaitGroup
		var mu sync.Mutex // guards reads
		reads := 0
		stop := time.Now().Add(d)
		for range 8 {
			wg.Go(func() {
				n := 0
				for time.Now().Before(stop) {
					if _, err := c.Get(context.Background(), "item:1"); err != nil {
						t.Errorf("Get: %v", err)
						return
					}
					n++
				}
				mu.Lock()
				reads += n
				mu.Unlock()
			})
		}
		wg.Wait()
		return reads
	}
	const d = 2 * time.Second
	var off, on int64
	for _, tt := range []struct {
		name    string
		opt     Option
		maxGets int64 // over d
	}{
		{"off", WithLocalProtection(NoLimit, time.Second), -1},
		// At most 401 reads per window and a protected second after each.
		{"default 400/s", nil, 3 * 401},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := []Option{WithRedis(rs.Addr), WithLoader(newSource("item:1", "v"))}
			if tt.opt != nil {
				opts = append(opts, tt.opt)
			}
			c := newClient(t, opts...)
			get(t, c, "item:1") // now in Redis
			g0 := getCalls(t, rs.Addr)
			reads := storm(c, d)
			gets := getCalls(t, rs.Addr) - g0
			t.Logf("local protection %s: %d Gets, %d Redis GETs in %v (%.0f GETs/s)", tt.name, reads, gets, d, float64(gets)/d.Seconds())
			if tt.maxGets >= 0 && gets > tt.maxGets {
				t.Errorf("Redis GETs = %d in %v, want <= %d", gets, d, tt.maxGets)
			}
			if tt.maxGets < 0 {
				off = gets
			} else {
				on = gets
			}
			// A protected value is dropped by an invalidation like any other copy.
			if err := c.Set(context.Background(), "item:1", []byte("v2")); err != nil {
				t.Fatal(err)
			}
			if got := get(t, c, "item:1"); got != "v2" {
				t.Errorf("Get after Set = %q, want v2", got)
			}
		})
	}
	// Only a storm faster than the limit shows the difference; a machine too
	// busy to make one cannot (the cap above is checked either way).
	if off > 3*401 && off <= on {
		t.Errorf("Redis GETs without protection = %d, with it %d: want more without", off, on)
	}
}

// TestLookupServed checks how Lookup reports each kind of answer.
func TestLookupServed(t *testing.T) {
	src := newSource("a", "A", "b", "B", "k", "K")
	blank := func(ctx context.Context, key string, err error) ([]byte, error) {
		if !errors.Is(err, ErrThrottled) {
			t.Errorf("fallback called with %v, want ErrThrottled", err)
		}
		return []byte("blank"), nil
	}
	// Buckets of one token that refill in 1000 s: however slow the machine,
	// the promotion's load takes the only tokens.
	c := newClient(t, WithLoader(src), WithLoaderLimit(0.001), WithHotReadLimit(0.001), WithFallback(blank))
	promote(t, c, "k")
	c.markAllStale() // k's value is stale, and no token is left to reload it
	tests := []struct {
		key        string
		want       string
		wantServed Served
	}{
		{"k", "K", Stale},        // hot, stale, no token: the stale value
		{"b", "blank", Fallback}, // cold, no Loader token: the fallback's answer
	}
	for _, tt := range tests {
		v, s, err := c.Lookup(context.Background(), tt.key)
		if err != nil || string(v) != tt.want || s != tt.wantServed {
			t.Errorf("Lookup(%q) = %q, %v, %v; want %q, %v, nil", tt.key, v, s, err, tt.want, tt.wantServed)
		}
	}
	if got := testCounter(t, c.m.fallbackAnswers); got != 1 {
		t.Errorf("fallback_answers_total = %v, want 1", got)
	}
}

// TestLimitsOff switches the Loader limit off: many distinct loads at once
// are never throttled.
func TestLimitsOff(t *testing.T) {
	src := newSource()
	for i := range 5000 {
		src.data[fmt.Sprint("k", i)] = []byte("v")
	}
	c := newClient(t, WithLoader(src), WithLoaderLimit(NoLimit))
	for i := range 5000 {
		if _, err := c.Get(context.Background(), fmt.Sprint("k", i)); err != nil {
			t.Fatalf("Get %d with the Loader limit off: %v", i, err)
		}
	}
}

// TestClosedAnswers checks IsHot and Hot after Close.
func TestClosedAnswers(t *testing.T) {
	c := newClient(t, WithLoader(newSource("k", "v")))
	promote(t, c, "k")
	c.onChange(hotwatch.Change{App: c.o.app})
	if !c.IsHot("k") {
		t.Fatal("IsHot before Close = false, want true")
	}
	c.Close()
	if c.IsHot("k") {
		t.Error("IsHot after Close = true, want false")
	}
	if h := c.Hot(); h != nil {
		t.Errorf("Hot after Close = %v, want nil", h)
	}
	if _, err := c.Warm(context.Background(), []string{"k"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Warm after Close: %v, want ErrClosed", err)
	}
	if err := c.Invalidate(context.Background(), "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Invalidate after Close: %v, want ErrClosed", err)
	}
	if _, err := c.InvalidatePrefix(context.Background(), "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("InvalidatePrefix after Close: %v, want ErrClosed", err)
	}
}
