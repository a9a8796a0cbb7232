package hotwatch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotset"
)

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
		// The disconnection is noticed when the TTL runs out (+10s); the
		// keys are kept MaxStale (1m) past it.
		{"outage over MaxStale: dropped MaxStale after its TTL", 5 * time.Minute, nil, 70 * time.Second},
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
				if got := time.Duration(gone.Load()); got < tt.wantGone || got > tt.wantGone+disconnectPoll+10*time.Millisecond {
					t.Errorf("key gone at +%v, want +%v", got, tt.wantGone)
				}
			})
		})
	}
}
