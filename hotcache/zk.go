package hotcache

import (
	"context"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// zkFollower is the ZooKeeper session and the hot-set watcher of a Client.
type zkFollower struct {
	s *zkgroup.Session
	w *hotwatch.Watcher
}

// startZK connects to ZooKeeper and follows the app's hot set. If ZooKeeper
// does not answer within wait, New goes on without it (nothing is hot) and
// a background loop keeps connecting until it succeeds or Close.
func (c *Client) startZK(ctx context.Context, wait time.Duration) {
	connect := func(ctx context.Context) bool {
		s, err := zkgroup.Connect(ctx, c.o.zkServers, zkgroup.Config{Logger: c.log, Registerer: c.o.reg, Auth: c.o.sec.zkAuth})
		if err != nil {
			c.log.Warn("hotcache: ZooKeeper not reachable; no key is hot until it is", "err", err)
			return false
		}
		w, err := hotwatch.New(s, hotwatch.Config{Root: c.o.zkRoot, App: c.o.app, OnChange: c.onChange, Logger: c.log, Registerer: c.o.reg})
		if err != nil { // a bad root: retrying will not help
			s.Close()
			c.log.Error("hotcache: cannot watch the hot set", "err", err)
			return true
		}
		c.zk.Store(&zkFollower{s: s, w: w})
		c.spawn(func() { c.runWatcher(w) })
		return true
	}
	first, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if connect(first) {
		return
	}
	c.spawn(func() {
		for backoff := time.Second; ; backoff = min(2*backoff, 30*time.Second) {
			select {
			case <-time.After(backoff):
			case <-c.bg.Done():
				return
			}
			ctx, cancel := context.WithTimeout(c.bg, 10*time.Second)
			ok := connect(ctx)
			cancel()
			if ok {
				return
			}
		}
	})
}

// runWatcher runs w until Close. Run returns early only when a watch fails
// for good (zkgroup retries everything else); the hot set it published stays
// in place meanwhile.
func (c *Client) runWatcher(w *hotwatch.Watcher) {
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
}
