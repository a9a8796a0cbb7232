package main

import (
	"context"
	"math"
	"net/url"
	"testing"
	"time"

	"github.com/hotspot-dev/hotspot/internal/loadgen"
)

// keySources is the part of GET /v1/hotkeys/{key} that says who sends it.
type keySources struct {
	Hot     bool `json:"hot"`
	Sources []struct {
		Source string  `json:"source"`
		Share  float64 `json:"share"`
	} `json:"sources"`
	Distinct float64 `json:"distinct_sources"`
}

// TestSourcesEndToEnd: 1000 app instances (the load generator's, each
// writing version 3 batches under its own name) read two hot keys through
// two hotspotd. One key gets 70 % of its reads from instance inst-0: both
// processes name inst-0 first with a share within 5 points of 0.70. The
// other is read evenly by all 1000: its distinct_sources is within 10 % of
// 1000.
func TestSourcesEndToEnd(t *testing.T) {
	c := newCluster(t, 4)
	procs := []*proc{c.start("s1"), c.start("s2")}
	const threshold = 1000
	cfg := loadgen.Config{
		Brokers: []string{c.brokers}, Topic: c.topic, App: "shop",
		Rate: 5000, Keys: 20_000, Skew: 1.1, KeyPrefix: "bg:", Threshold: threshold,
		Sources: 1000, Duration: 12 * time.Second,
		Flashes: []loadgen.Flash{
			{App: "shop", Key: "item:share", Rate: 3 * threshold, TopSource: "inst-0", TopShare: 0.7},
			{App: "shop", Key: "item:many", Rate: 20 * threshold}, // 20 reads/s per instance
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	load := make(chan error, 1)
	go func() { _, err := loadgen.Run(ctx, cfg); load <- err }()
	get := func(p *proc, key string) keySources {
		var ks keySources
		getJSON(t, "http://"+p.addr+"/v1/hotkeys/"+url.PathEscape(key)+"?app=shop", &ks)
		return ks
	}
	// Both keys hot for a few windows first: shares and the distinct
	// count are over about the rule's window (1 s), the sketch over one to
	// two windows.
	waitFor(t, 10*time.Second, "both keys hot", func() bool {
		return get(procs[0], "item:share").Hot && get(procs[0], "item:many").Hot
	})
	time.Sleep(3 * time.Second)
	for _, p := range procs {
		ks := get(p, "item:share")
		if len(ks.Sources) == 0 || ks.Sources[0].Source != "inst-0" {
			t.Errorf("%s: item:share's sources %+v, want inst-0 first", p.id, ks.Sources)
		} else if s := ks.Sources[0].Share; math.Abs(s-0.7) > 0.05 {
			t.Errorf("%s: inst-0 sends %.3f of item:share, want 0.70 within 5 points", p.id, s)
		}
		if len(ks.Sources) > 8 {
			t.Errorf("%s: %d sources listed, at most 8", p.id, len(ks.Sources))
		}
		many := get(p, "item:many")
		if math.Abs(many.Distinct-1000)/1000 > 0.10 {
			t.Errorf("%s: item:many has %v distinct sources, want 1000 within 10 %%", p.id, many.Distinct)
		}
		t.Logf("%s: item:share %+v; item:many %v distinct", p.id, ks.Sources, many.Distinct)
	}
	cancel()
	<-load
}
