package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/hotwatch"
)

// TestWebhookDelayFigure measures, for BENCHMARKS.md, how long after the
// ZooKeeper change a webhook receiver gets the event: waves of keys turn hot
// and cold on a two-process cluster; a watcher in this process (as an app
// has) notes when each change arrives, the receiver (same process, same
// clock) when each delivery does. Run with HOTSPOT_FIGURES=1.
func TestWebhookDelayFigure(t *testing.T) {
	if os.Getenv("HOTSPOT_FIGURES") != "1" {
		t.Skip("a measurement for BENCHMARKS.md; HOTSPOT_FIGURES=1 runs it")
	}
	c := newCluster(t, 4)
	p1, _ := c.start("f1"), c.start("f2")

	var mu sync.Mutex
	changed := map[string]time.Time{} // kind/key -> first ZooKeeper change seen here
	w, err := hotwatch.New(c.session(t), hotwatch.Config{Root: c.root, App: "shop", OnChange: func(ch hotwatch.Change) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range ch.Added {
			if _, ok := changed["promoted/"+k.Key]; !ok {
				changed["promoted/"+k.Key] = ch.At
			}
		}
		for _, k := range ch.Removed {
			if _, ok := changed["demoted/"+k]; !ok {
				changed["demoted/"+k] = ch.At
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	wdone := make(chan struct{})
	go func() { defer close(wdone); w.Run(wctx) }()
	defer func() { wcancel(); <-wdone }()

	live := &hookReceiver{at: map[string]time.Time{}}
	srv := httptest.NewServer(live)
	defer srv.Close()
	admin := adminCall(t, "PUT", "http://"+p1.addr+"/v1/webhooks/fig?app=shop", "Bearer e2e-secret",
		`{"url":"`+srv.URL+`","secret":"e2e-hook"}`)
	if admin != 204 {
		t.Fatalf("subscribe: %d", admin)
	}
	time.Sleep(time.Second) // both aggregators follow the subscription

	const waves, perWave = 20, 10
	prod := newProducer(t, c.brokers, c.topic, true)
	for wave := range waves {
		rates := map[string]float64{}
		for i := range perWave {
			rates[fmt.Sprintf("fig:%02d:%d", wave, i)] = 2500
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { prod.run(ctx, t, rates, 500) })
		time.Sleep(2 * time.Second)
		cancel()
		wg.Wait()
	}
	n := 2 * waves * perWave
	waitFor(t, 60*time.Second, "every event at the receiver", func() bool {
		p, _ := live.count("promoted")
		d, _ := live.count("demoted")
		return p+d >= n
	})
	time.Sleep(time.Second)
	for _, kind := range []string{"promoted", "demoted", ""} {
		var ds []time.Duration
		mu.Lock()
		live.mu.Lock()
		for k, got := range live.at {
			if kind != "" && k[:len(kind)] != kind {
				continue
			}
			if zk, ok := changed[k]; ok {
				ds = append(ds, got.Sub(zk))
			}
		}
		live.mu.Unlock()
		mu.Unlock()
		slices.Sort(ds)
		if len(ds) == 0 {
			t.Fatalf("no %q events matched a ZooKeeper change", kind)
		}
		q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
		t.Logf("kind %-8q n=%d  min %v  p50 %v  p90 %v  p99 %v  max %v (delivery minus ZooKeeper change seen by a watcher)",
			kind, len(ds), ds[0], q(.5), q(.9), q(.99), ds[len(ds)-1])
	}
	var fromDecision []time.Duration
	live.mu.Lock()
	for _, ev := range live.events {
		fromDecision = append(fromDecision, live.at[ev.Kind+"/"+ev.Key].Sub(ev.At))
	}
	live.mu.Unlock()
	slices.Sort(fromDecision)
	t.Logf("decision to delivery: n=%d  p50 %v  p99 %v  max %v", len(fromDecision), fromDecision[len(fromDecision)/2],
		fromDecision[len(fromDecision)*99/100], fromDecision[len(fromDecision)-1])
	p, _ := live.count("promoted")
	d, _ := live.count("demoted")
	if p != n/2 || d != n/2 {
		t.Errorf("receiver got %d promotions and %d demotions, want %d each (once per subscription)", p, d, n/2)
	}
}
