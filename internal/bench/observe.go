package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// observer watches a bench run from the outside, the way users see the
// cluster: when each key first appears in the published hot set, when its
// value first sits in the L1 of an app, and the hotspotd processes' resident
// memory. Its goroutines run until stop or close.
type observer struct {
	sess   *zkgroup.Session
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex // guards seen
	seen observed
}

// observed is what a observer recorded.
type observed struct {
	published map[loadgen.AppKey]time.Time // first time in the hot set in ZooKeeper
	inL1      map[loadgen.AppKey]time.Time // first time loaded in the app's L1
	maxRSS    float64                      // bytes, the largest of any hotspotd
	lag       []float64                    // every second: records the detectors have not read yet, all hotspotd
}

// startObserver returns once the hot set under root has been read, so
// that every later change is timed.
func startObserver(ctx context.Context, cfg Config) (*observer, error) {
	servers, zkAuth, root, app := cfg.ZooKeeper, cfg.ZKAuth, cfg.Root, cfg.Workload.App
	connectCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	sess, err := zkgroup.Connect(connectCtx, servers, zkgroup.Config{Auth: zkAuth})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("no ZooKeeper session with %v: %w", servers, err)
	}
	o := &observer{sess: sess, seen: observed{
		published: make(map[loadgen.AppKey]time.Time),
		inL1:      make(map[loadgen.AppKey]time.Time),
	}}
	watcher, err := hotwatch.New(sess, hotwatch.Config{Root: root, OnChange: o.recordPublished})
	if err != nil {
		sess.Close()
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	o.cancel = stop
	o.wg.Go(func() { watcher.Run(runCtx) })
	select {
	case <-watcher.Ready():
	case <-ctx.Done():
		o.close()
		return nil, ctx.Err()
	}

	if cfg.L1Keys != nil {
		o.wg.Go(func() { o.pollL1(runCtx, app, cfg.L1Keys) })
	}
	o.wg.Go(func() { o.sampleRSS(runCtx, cfg.Hotspotds) })
	return o, nil
}

func (o *observer) recordPublished(c hotwatch.Change) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range c.Added {
		ak := loadgen.AppKey{App: c.App, Key: k.Key}
		if _, ok := o.seen.published[ak]; !ok {
			o.seen.published[ak] = c.At
		}
	}
}

// pollL1 records, every 2 ms, the keys whose value the app has loaded.
func (o *observer) pollL1(ctx context.Context, app string, loaded func() []string) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			o.mu.Lock()
			for _, k := range loaded() {
				ak := loadgen.AppKey{App: app, Key: k}
				if _, ok := o.seen.inL1[ak]; !ok {
					o.seen.inL1[ak] = now
				}
			}
			o.mu.Unlock()
		}
	}
}

// sampleRSS keeps the largest resident memory of any hotspotd and the
// detectors' consumer lag, every second.
func (o *observer) sampleRSS(ctx context.Context, hotspotds []*hotspotapi.Client) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		ms, _ := Scrape(ctx, hotspotds)
		o.mu.Lock()
		var lag float64
		for _, m := range ms {
			o.seen.maxRSS = max(o.seen.maxRSS, m["process_resident_memory_bytes"])
			lag += m["hotspot_detector_lag_records"]
		}
		if len(ms) > 0 {
			o.seen.lag = append(o.seen.lag, lag)
		}
		o.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stop ends the observation and returns what it saw.
func (o *observer) stop() observed {
	o.cancel()
	o.wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen
}

// close stops the observer and releases its ZooKeeper session; it
// may follow stop.
func (o *observer) close() {
	o.cancel()
	o.wg.Wait()
	o.sess.Close()
}
