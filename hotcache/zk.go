package hotcache

import (
	"context"
	"fmt"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// zkFollower is the ZooKeeper session and the hot-set watcher of a Client.
type zkFollower struct {
	s *zkgroup.Session
	w *hotwatch.Watcher
}

func startZK(ctx context.Context, c *Client) (*zkFollower, error) {
	s, err := zkgroup.Connect(ctx, c.o.zkServers, zkgroup.Config{Logger: c.log})
	if err != nil {
		return nil, fmt.Errorf("hotcache: %w", err)
	}
	w, err := hotwatch.New(s, hotwatch.Config{Root: c.o.zkRoot, App: c.o.app, OnChange: c.onChange, Logger: c.log})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("hotcache: %w", err)
	}
	z := &zkFollower{s: s, w: w}
	c.spawn(func() {
		// Run returns only when a watch fails for good; the hot set it
		// published stays in place (and ages out by TTL) while it restarts.
		for {
			err := w.Run(c.bg)
			if c.bg.Err() != nil {
				return
			}
			c.log.Error("hotcache: hot-set watcher stopped; restarting", "err", err)
			select {
			case <-time.After(time.Second):
			case <-c.bg.Done():
				return
			}
		}
	})
	return z, nil
}

func (z *zkFollower) ready() <-chan struct{} { return z.w.Ready() }

func (z *zkFollower) close() { z.s.Close() }
