package hotcache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestSetDuringRedisOutage writes a hot and a cold key through one of 4
// instances while Redis does not answer, and checks that the writer never
// serves the old values after Set returns, and that every instance serves
// the new ones within 1 s of Redis answering again.
func TestSetDuringRedisOutage(t *testing.T) {
	zkAddr := stacktest.ZK(t)
	rs := stacktest.StartRedisServer(t)
	t.Cleanup(rs.Resume) // never leave a stopped process behind
	hs := stacktest.NewHotSet(t, zkAddr)
	src := newSource("hot", "h1", "cold", "c1")
	cs := startInstances(t, 4, WithApp(hs.App), WithZooKeeper([]string{zkAddr}, hs.Root),
		WithRedis(rs.Addr), WithLoader(src), WithTimeout(100*time.Millisecond))
	hs.Set("hot")
	for _, c := range cs {
		waitFor(t, "promotion", func() bool { h := c.Hot(); return len(h) == 1 && h[0].Loaded })
		for k, want := range map[string]string{"hot": "h1", "cold": "c1"} {
			if got := get(t, c, k); got != want {
				t.Fatalf("before the outage Get(%q) = %q, want %q", k, got, want)
			}
		}
		c.recent.Wait()
	}

	rs.Pause()
	w := cs[0]
	for k, v := range map[string]string{"hot": "h2", "cold": "c2"} {
		err := w.Set(context.Background(), k, []byte(v))
		if !errors.Is(err, ErrNotInvalidated) || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrWriteFailed) {
			t.Fatalf("Set(%q) with Redis down: %v, want ErrNotInvalidated and ErrUnavailable", k, err)
		}
		t.Logf("Set(%q) with Redis down: %v", k, err)
	}
	// From here on the writer must never serve an old value.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex // guards old
	var old []string
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for k, bad := range map[string]string{"hot": "h1", "cold": "c1"} {
				if v, err := w.Get(context.Background(), k); err == nil && string(v) == bad {
					mu.Lock()
					old = append(old, fmt.Sprintf("%s=%s at %v", k, v, time.Now().Format("15:04:05.000")))
					mu.Unlock()
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	time.Sleep(2 * time.Second) // the outage
	for k, want := range map[string]string{"hot": "h2", "cold": "c2"} {
		if got := get(t, w, k); got != want {
			t.Errorf("writer during the outage: Get(%q) = %q, want %q", k, got, want)
		}
	}

	rs.Resume()
	back := time.Now()
	var worst time.Duration
	for i, c := range cs {
		waitFor(t, "the new values", func() bool {
			h, err1 := c.Get(context.Background(), "hot")
			cv, err2 := c.Get(context.Background(), "cold")
			return err1 == nil && err2 == nil && string(h) == "h2" && string(cv) == "c2"
		})
		took := time.Since(back)
		worst = max(worst, took)
		t.Logf("instance %d serves both new values %v after Redis answers again", i, took)
	}
	// The retry's second delete and the refreshes come after: watch a while longer.
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if len(old) > 0 {
		t.Errorf("the writer served old values after its Set: %v", old)
	}
	if worst > time.Second {
		t.Errorf("slowest instance served the new values %v after Redis was back, want <= 1s", worst)
	}
	for i, c := range cs {
		for k, want := range map[string]string{"hot": "h2", "cold": "c2"} {
			if got := get(t, c, k); got != want {
				t.Errorf("instance %d at the end: Get(%q) = %q, want %q", i, k, got, want)
			}
		}
	}
	if n := w.pending.n.Load(); n != 0 {
		t.Errorf("pending invalidations at the end = %d, want 0", n)
	}
}

// TestWriteErrorsDistinct checks that a failed write and a failed
// invalidation are told apart.
func TestWriteErrorsDistinct(t *testing.T) {
	src := newSource("k", "v")
	failing := &failingWriter{source: src, err: errors.New("disk full")}
	c := newClient(t, WithLoader(failing), WithRedis("127.0.0.1:1"), WithTimeout(50*time.Millisecond))
	err := c.Set(context.Background(), "k", []byte("x"))
	if !errors.Is(err, ErrWriteFailed) || !errors.Is(err, failing.err) || errors.Is(err, ErrNotInvalidated) {
		t.Errorf("Set with a failing Writer: %v, want ErrWriteFailed wrapping the Writer's error", err)
	}
	failing.err = nil
	err = c.Set(context.Background(), "k", []byte("x"))
	if !errors.Is(err, ErrNotInvalidated) || errors.Is(err, ErrWriteFailed) {
		t.Errorf("Set with Redis down: %v, want ErrNotInvalidated", err)
	}
	if got := get(t, c, "k"); got != "x" {
		t.Errorf("Get after Set with Redis down = %q, want x (from the Loader)", got)
	}
}

type failingWriter struct {
	*source
	err error
}

func (f *failingWriter) Write(ctx context.Context, key string, value []byte) error {
	if f.err != nil {
		return f.err
	}
	return f.source.Write(ctx, key, value)
}

// TestPendingQueueBounded fills the retry queue and checks that what does
// not fit is dropped, counted and reported.
func TestPendingQueueBounded(t *testing.T) {
	c := newClient(t, WithLoader(newSource()), WithRedis("127.0.0.1:1"), WithTimeout(20*time.Millisecond),
		WithInvalidationQueue(2))
	var errs []error
	for _, k := range []string{"a", "b", "c"} {
		errs = append(errs, c.Invalidate(context.Background(), k))
	}
	for i, err := range errs {
		if !errors.Is(err, ErrNotInvalidated) {
			t.Errorf("Invalidate %d: %v, want ErrNotInvalidated", i, err)
		}
	}
	if got := testCounter(t, c.m.pendingDropped); got != 1 {
		t.Errorf("dropped = %v, want 1", got)
	}
	if got, want := c.pending.n.Load(), int32(2); got != want {
		t.Errorf("pending = %d, want %d", got, want)
	}
}
