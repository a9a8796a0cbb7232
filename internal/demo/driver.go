package demo

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotspot-dev/hotspot/internal/loadgen"
	"github.com/hotspot-dev/hotspot/internal/score"
)

// driver reads items through the apps: Zipf background plus the flash crowd.
type driver struct {
	apps       []string
	flashes    []loadgen.Flash
	background float64
	client     *http.Client
	reqs       chan string
	sent       atomic.Int64
	throttled  atomic.Int64           // 503: a rate limit of the app refused the read
	failed     atomic.Int64           // transport errors and other statuses
	dropped    atomic.Int64           // not sent: the apps were saturated
	next       int                    // the app of the next read, round robin; pace's own
	mu         sync.Mutex             // guards flashSent
	flashSent  map[string][]time.Time // flash key -> send time of each read
}

func newDriver(apps []string, flashes []loadgen.Flash, background float64) *driver {
	return &driver{
		apps: apps, flashes: flashes, background: background,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			MaxIdleConns: 256, MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second}},
		reqs:      make(chan string, 4096),
		flashSent: make(map[string][]time.Time),
	}
}

// run sends reads until ctx ends, then waits for those in flight.
func (d *driver) run(ctx context.Context, start time.Time) {
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(d.work)
	}
	defer wg.Wait()
	defer close(d.reqs)
	d.pace(ctx, start)
}

// work performs the reads queued in d.reqs and counts their outcomes.
func (d *driver) work() {
	for u := range d.reqs {
		resp, err := d.client.Get(u)
		if err != nil {
			d.failed.Add(1)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			d.throttled.Add(1)
		default:
			d.failed.Add(1)
		}
	}
}

// pace queues reads every 10 ms, as many as the background and the flash
// keys' rates owe since the last tick, until ctx ends.
func (d *driver) pace(ctx context.Context, start time.Time) {
	zipf := rand.NewZipf(rand.New(rand.NewPCG(42, 7)), 1.1, 1, 9_999)
	owed := make([]float64, len(d.flashes)+1)
	tk := time.NewTicker(10 * time.Millisecond)
	defer tk.Stop()
	last := start
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		owed[0] += d.background * dt
		for ; owed[0] >= 1; owed[0]-- {
			d.send(strconv.FormatUint(zipf.Uint64()+1000, 10)) // items 1000..10999
		}
		for i, f := range d.flashes {
			owed[i+1] += f.RateAt(now.Sub(start)) * dt
			id := strings.TrimPrefix(f.Key, "item:")
			for ; owed[i+1] >= 1; owed[i+1]-- {
				if d.send(id) {
					d.mu.Lock()
					d.flashSent[f.Key] = append(d.flashSent[f.Key], time.Now())
					d.mu.Unlock()
				}
			}
		}
	}
}

// send queues a read of item id on the next app, round robin; it drops
// the read and reports false when the queue is full.
func (d *driver) send(id string) bool {
	u := "http://" + d.apps[d.next%len(d.apps)] + "/item/" + id
	d.next++
	select {
	case d.reqs <- u:
		d.sent.Add(1)
		return true
	default: // the apps are saturated: drop rather than queue without bound
		d.dropped.Add(1)
		return false
	}
}

// crossing is when key's trailing one-second read count first reached n.
func (d *driver) crossing(key string, n int) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return score.FirstCrossing(d.flashSent[key], n, time.Second)
}
