package hotwatch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
)

// TestFrozenProcessExpiresByTTL: a process frozen (SIGSTOP) longer than the
// TTL loses its ZooKeeper connection too, but that is no outage: on resume
// the TTLs apply at once, and Snapshot does not serve the stale set meanwhile.
func TestFrozenProcessExpiresByTTL(t *testing.T) {
	f := newFakeZK()
	var up atomic.Bool
	up.Store(true)
	w := newWatcher(f.watch, Config{Root: root, App: "shop"})
	w.connected = up.Load
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	w.now = func() time.Time { return time.Unix(0, clock.Load()) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	putShard(t, f, "shop", "agg-1", w.now(), 10*time.Second, hotset.Key{Key: "k", Rate: 2000})
	for len(w.Snapshot().App("shop")) == 0 {
		time.Sleep(time.Millisecond)
	}
	// The freeze: the clock jumps 20 s, the connection is gone.
	up.Store(false)
	clock.Add(int64(20 * time.Second))
	w.beat.Store(w.beat.Load() - int64(20*time.Second))
	// The loop's next round (within beatEvery) expires the key by its TTL,
	// although the connection is down.
	deadline := time.Now().Add(2 * beatEvery)
	for len(w.Snapshot().App("shop")) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := keysOf(w.Snapshot(), "shop"); len(got) != 0 {
		t.Errorf("Snapshot after the freeze: %v, want the stale key gone", got)
	}
}

// TestOutageKeepsTheHotSet: while the ZooKeeper connection is down, shards
// do not expire (nobody can renew them), up to MaxStale; after a reconnect
// their TTLs run from the reconnect.
func TestOutageKeepsTheHotSet(t *testing.T) {
	tests := []struct {
		name       string
		outage     time.Duration // from +1s
		wantDuring []string      // at +1s + outage - 1ms
		wantGone   time.Duration // when the key is gone, from the start
	}{
		{"no outage: the TTL", 0, nil, 10 * time.Second},
		{"outage over the TTL: kept, then a TTL from the reconnect", 30 * time.Second, []string{"k"}, 41 * time.Second},
		// The disconnection (+1s) is noticed within beatEvery; the keys
		// are kept MaxStale (1m) from then.
		{"outage over MaxStale: dropped MaxStale after the disconnection", 5 * time.Minute, nil, 61*time.Second + beatEvery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeZK()
				var up atomic.Bool
				up.Store(true)
				w := newWatcher(f.watch, Config{Root: root, App: "shop", MaxStale: time.Minute})
				w.connected = up.Load
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- w.Run(ctx) }()
				defer func() { cancel(); <-done }()
				start := time.Now()
				putShard(t, f, "shop", "agg-1", start, 10*time.Second, hotset.Key{Key: "k", Rate: 2000})
				time.Sleep(time.Second)
				var gone atomic.Int64 // ns after start
				go func() {
					for len(w.Snapshot().App("shop")) > 0 {
						time.Sleep(10 * time.Millisecond)
					}
					gone.Store(int64(time.Since(start)))
				}()
				if tt.outage > 0 {
					up.Store(false)
					time.Sleep(tt.outage - time.Millisecond)
					synctest.Wait()
					if got := fmt.Sprint(keysOf(w.Snapshot(), "shop")); got != fmt.Sprint(tt.wantDuring) {
						t.Errorf("at the end of the outage: keys %v, want %v", got, tt.wantDuring)
					}
					time.Sleep(time.Millisecond)
					up.Store(true)
				}
				for gone.Load() == 0 {
					time.Sleep(10 * time.Millisecond)
				}
				if got := time.Duration(gone.Load()); got < tt.wantGone-beatEvery || got > tt.wantGone+beatEvery+10*time.Millisecond {
					t.Errorf("key gone at +%v, want +%v", got, tt.wantGone)
				}
			})
		})
	}
}
