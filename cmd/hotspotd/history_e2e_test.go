package main

import (
	"context"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// cleanHistory deletes the cluster's history streams at the end of the test.
func (c *cluster) cleanHistory(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: stacktest.Redis(t)})
	t.Cleanup(func() {
		defer rdb.Close()
		ctx := context.Background()
		if keys, _ := rdb.Keys(ctx, "hotspot:history:"+c.root+"/*").Result(); len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
}

// TestHistorySurvivesRestart: a key that turns hot and cold again is in
// the history of every hotspotd, and still there after every process of the
// cluster was stopped and a new one started.
func TestHistorySurvivesRestart(t *testing.T) {
	c := newCluster(t, 2)
	p1, p2 := c.start("h1"), c.start("h2")

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	prod := newProducer(t, c.brokers, c.topic, true)
	wg.Go(func() { prod.run(ctx, t, map[string]float64{"hist:a": 3000}, 200) })
	start := time.Now()
	q := "/v1/history?app=shop&key=" + url.QueryEscape("hist:a")
	var res hotspotapi.History
	waitFor(t, 30*time.Second, "hist:a promoted in the history", func() bool {
		getJSON(t, "http://"+p2.addr+q, &res)
		return len(res.Events) == 1
	})
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	waitFor(t, 30*time.Second, "hist:a demoted in the history", func() bool {
		getJSON(t, "http://"+p1.addr+q, &res)
		return len(res.Events) == 2
	})
	before := res
	if p, d := before.Events[1], before.Events[0]; p.Kind != "promoted" || d.Kind != "demoted" || p.Key != "hist:a" ||
		p.Rate < 1000 || p.Rule != -1 || d.Rule != -1 || p.At.Before(start) || !d.At.After(p.At) || before.App != "shop" {
		t.Errorf("history = %+v, want hist:a promoted at >= 1000/s then demoted, rule -1, newest first", before)
	}

	p1.stop(t)
	p2.stop(t)
	p3 := c.start("h3")
	var after hotspotapi.History
	getJSON(t, "http://"+p3.addr+q, &after)
	if len(after.Events) != 2 || !reflect.DeepEqual(after.Events, before.Events) {
		t.Errorf("history after restarting every hotspotd = %+v, want %+v", after, before)
	}
	// The filters apply to the stored history as well.
	since := before.Events[0].At.Format(time.RFC3339Nano)
	getJSON(t, "http://"+p3.addr+q+"&since="+url.QueryEscape(since), &after)
	if len(after.Events) != 1 || after.Events[0].Kind != "demoted" {
		t.Errorf("history since the demotion = %+v, want the demotion alone", after)
	}
}
