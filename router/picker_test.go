package router_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/router"
)

func newPicker(t *testing.T, nodes []router.Node, cfg router.PickerConfig) (*router.Table, *router.Picker) {
	t.Helper()
	tab := router.NewTable(router.Config{VirtualNodes: 64})
	if err := tab.Update(nodes); err != nil {
		t.Fatal(err)
	}
	p, err := router.NewPicker(tab, cfg)
	if err != nil {
		t.Fatalf("NewPicker: %v", err)
	}
	return tab, p
}

// candidates returns key's first three nodes in ring order.
func candidates(tab *router.Table, key string) []router.Node {
	return tab.Ring().LookupN(key, 3, nil)
}

// good and bad are samples at either end of every metric.
var (
	good = router.Sample{HitRatio: 1, Load: 0, Latency: 0, Staleness: 0}
	bad  = router.Sample{HitRatio: 0, Load: 1, Latency: time.Second, Staleness: time.Hour}
)

func TestNewPickerConfig(t *testing.T) {
	tab := router.NewTable(router.Config{})
	tests := []struct {
		name string
		cfg  router.PickerConfig
		ok   bool
	}{
		{"defaults", router.PickerConfig{}, true},
		{"16 candidates", router.PickerConfig{Candidates: 16}, true},
		{"17 candidates", router.PickerConfig{Candidates: 17}, false},
		{"negative candidates", router.PickerConfig{Candidates: -1}, false},
		{"negative weight", router.PickerConfig{Weights: router.Weights{HitRatio: -0.1, Load: 1}}, false},
		{"one weight", router.PickerConfig{Weights: router.Weights{Latency: 1}}, true},
		{"negative half-life", router.PickerConfig{HalfLife: -time.Second}, false},
		{"negative max age", router.PickerConfig{MaxAge: -time.Second}, false},
		{"tolerance 0.1", router.PickerConfig{Tolerance: 0.1}, true},
		{"tolerance 1", router.PickerConfig{Tolerance: 1}, true},
		{"tolerance above 1", router.PickerConfig{Tolerance: 1.5}, false},
		{"negative tolerance", router.PickerConfig{Tolerance: -0.1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := router.NewPicker(tab, tt.cfg)
			if got := err == nil; got != tt.ok {
				t.Errorf("NewPicker(%+v): err = %v, want ok = %v", tt.cfg, err, tt.ok)
			}
		})
	}
	if _, err := router.NewPicker(nil, router.PickerConfig{}); err == nil {
		t.Error("NewPicker(nil table) succeeded, want an error")
	}
}

func TestPickWithoutMetricsFollowsRing(t *testing.T) {
	tab, p := newPicker(t, nodeSet("n", 5), router.PickerConfig{})
	for _, k := range testKeys(2000) {
		want, _ := tab.Lookup(k)
		if got, ok := p.Pick(k); !ok || got != want {
			t.Fatalf("Pick(%q) = %v, %v; want the ring owner %v", k, got, ok, want)
		}
	}
	empty, _ := router.NewPicker(router.NewTable(router.Config{}), router.PickerConfig{})
	if n, ok := empty.Pick("k"); ok {
		t.Errorf("Pick on an empty ring = %v, true; want false", n)
	}
}

// TestPickScoring: each metric alone, with its weight alone, makes the
// third candidate win over the owner.
func TestPickScoring(t *testing.T) {
	const key = "user:7:profile"
	worse := router.Sample{HitRatio: 0.5, Load: 0.5, Latency: time.Millisecond, Staleness: time.Second}
	tests := []struct {
		name    string
		weights router.Weights
		better  router.Sample // for the third candidate; the owner gets worse
	}{
		{"hit ratio", router.Weights{HitRatio: 1}, router.Sample{HitRatio: 0.9, Load: 0.5, Latency: time.Millisecond, Staleness: time.Second}},
		{"load", router.Weights{Load: 1}, router.Sample{HitRatio: 0.5, Load: 0.1, Latency: time.Millisecond, Staleness: time.Second}},
		{"latency", router.Weights{Latency: 1}, router.Sample{HitRatio: 0.5, Load: 0.5, Latency: 100 * time.Microsecond, Staleness: time.Second}},
		{"freshness", router.Weights{Freshness: 1}, router.Sample{HitRatio: 0.5, Load: 0.5, Latency: time.Millisecond, Staleness: 0}},
		{"default weights", router.Weights{}, router.Sample{HitRatio: 0.8, Load: 0.4, Latency: time.Millisecond, Staleness: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tab, p := newPicker(t, nodeSet("n", 5), router.PickerConfig{Weights: tt.weights})
				c := candidates(tab, key)
				for range 5 {
					p.Observe(c[0].ID, worse)
					p.Observe(c[1].ID, worse)
					p.Observe(c[2].ID, tt.better)
					time.Sleep(time.Second)
				}
				if got, _ := p.Pick(key); got.ID != c[2].ID {
					t.Errorf("Pick = %s, want %s (better %s); candidates %v", got.ID, c[2].ID, tt.name, ids(c))
				}
			})
		})
	}
}

func ids(nodes []router.Node) []string {
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = n.ID
	}
	return s
}

// TestPickUnknownIsNeutral: a node without metrics ranks below a known good
// node and above a known bad one.
func TestPickUnknownIsNeutral(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "item:1"
		tab, p := newPicker(t, nodeSet("n", 5), router.PickerConfig{})
		c := candidates(tab, key)
		p.Observe(c[0].ID, bad)
		if got, _ := p.Pick(key); got.ID != c[1].ID {
			t.Errorf("owner bad, others unknown: Pick = %s, want %s", got.ID, c[1].ID)
		}
		p.Observe(c[2].ID, good)
		if got, _ := p.Pick(key); got.ID != c[2].ID {
			t.Errorf("third good: Pick = %s, want %s", got.ID, c[2].ID)
		}
	})
}

// TestPickDecay: old samples count less than new ones, and a node whose
// samples are older than MaxAge is treated as unknown (ring order again).
func TestPickDecay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "item:2"
		tab, p := newPicker(t, nodeSet("n", 5), router.PickerConfig{
			Weights: router.Weights{HitRatio: 1}, HalfLife: 10 * time.Second, MaxAge: 5 * time.Minute,
		})
		c := candidates(tab, key)
		steady := router.Sample{HitRatio: 0.6}
		for range 30 { // the owner misses for 30s, the second is steady
			p.Observe(c[0].ID, router.Sample{HitRatio: 0})
			p.Observe(c[1].ID, steady)
			time.Sleep(time.Second)
		}
		if got, _ := p.Pick(key); got.ID != c[1].ID {
			t.Fatalf("after owner misses: Pick = %s, want %s", got.ID, c[1].ID)
		}
		for range 30 { // then it hits for 30s; an undecayed mean would be 0.5
			p.Observe(c[0].ID, router.Sample{HitRatio: 1})
			p.Observe(c[1].ID, steady)
			time.Sleep(time.Second)
		}
		if got, _ := p.Pick(key); got.ID != c[0].ID {
			t.Fatalf("after owner recovers: Pick = %s, want %s", got.ID, c[0].ID)
		}
		// The owner stops reporting while the other keeps reporting a
		// better ratio: the owner's stale average fades towards neutral.
		for range 60 {
			p.Observe(c[1].ID, router.Sample{HitRatio: 0.8})
			time.Sleep(time.Second)
		}
		if got, _ := p.Pick(key); got.ID != c[1].ID {
			t.Fatalf("owner silent for 60s: Pick = %s, want %s", got.ID, c[1].ID)
		}
		// Past MaxAge nobody's samples count: ring order.
		time.Sleep(5*time.Minute + time.Second)
		if got, _ := p.Pick(key); got.ID != c[0].ID {
			t.Fatalf("all samples past MaxAge: Pick = %s, want the owner %s", got.ID, c[0].ID)
		}
	})
}

func TestPickUnhealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "item:3"
		tab, p := newPicker(t, nodeSet("n", 5), router.PickerConfig{UnhealthyFor: 10 * time.Second})
		all := tab.Ring().LookupN(key, 5, nil)
		p.Observe(all[0].ID, good) // metrics do not override health
		p.MarkUnhealthy(all[0].ID)
		if got, _ := p.Pick(key); got.ID != all[1].ID {
			t.Errorf("owner unhealthy: Pick = %s, want %s", got.ID, all[1].ID)
		}
		p.MarkHealthy(all[0].ID)
		if got, _ := p.Pick(key); got.ID != all[0].ID {
			t.Errorf("owner healthy again: Pick = %s, want %s", got.ID, all[0].ID)
		}
		for _, n := range all[:3] {
			p.MarkUnhealthy(n.ID)
		}
		if got, _ := p.Pick(key); got.ID != all[3].ID {
			t.Errorf("all 3 candidates unhealthy: Pick = %s, want the next node %s", got.ID, all[3].ID)
		}
		for _, n := range all {
			p.MarkUnhealthy(n.ID)
		}
		if got, ok := p.Pick(key); ok {
			t.Errorf("every node unhealthy: Pick = %s, true; want false", got.ID)
		}
		time.Sleep(11 * time.Second)
		if got, _ := p.Pick(key); got.ID != all[0].ID {
			t.Errorf("after UnhealthyFor: Pick = %s, want the owner %s", got.ID, all[0].ID)
		}
	})
}

// TestPickRingChange: metrics of a node that left the ring are ignored and
// samples for unknown IDs are dropped.
func TestPickRingChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "item:4"
		nodes := nodeSet("n", 5)
		tab, p := newPicker(t, nodes, router.PickerConfig{})
		p.Observe("not-a-member", good)
		p.MarkUnhealthy("not-a-member")
		c := candidates(tab, key)
		p.MarkUnhealthy(c[0].ID)
		var rest []router.Node
		for _, n := range nodes {
			if n.ID != c[0].ID {
				rest = append(rest, n)
			}
		}
		if err := tab.Update(rest); err != nil {
			t.Fatal(err)
		}
		want, _ := tab.Lookup(key)
		if got, _ := p.Pick(key); got != want {
			t.Errorf("after the owner left: Pick = %v, want %v", got, want)
		}
	})
}

func TestPickNoAlloc(t *testing.T) {
	tab, p := newPicker(t, nodeSet("n", 8), router.PickerConfig{})
	for _, n := range tab.Ring().Nodes() {
		p.Observe(n.ID, router.Sample{HitRatio: 0.5, Load: 0.5, Latency: time.Millisecond})
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := p.Pick("user:1:profile"); !ok {
			t.Fatal("Pick failed")
		}
	})
	if allocs != 0 {
		t.Errorf("Pick allocates %v times per call, want 0", allocs)
	}
}

// TestPickerConcurrent exercises every method at once; run with -race.
func TestPickerConcurrent(t *testing.T) {
	tab, p := newPicker(t, nodeSet("n", 6), router.PickerConfig{})
	nodes := tab.Ring().Nodes()
	keys := testKeys(100)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				n := nodes[(i+w)%len(nodes)]
				switch i % 5 {
				case 0:
					p.Observe(n.ID, router.Sample{HitRatio: float64(i%10) / 10, Latency: time.Duration(i) * time.Microsecond})
				case 1:
					p.MarkUnhealthy(n.ID)
				case 2:
					p.MarkHealthy(n.ID)
				case 3:
					if i%100 == 3 {
						if err := tab.Update(nodes[:len(nodes)-w%2]); err != nil {
							t.Error(err)
						}
					}
				default:
					p.Pick(keys[i%len(keys)])
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkPick(b *testing.B) { benchPick(b, router.PickerConfig{}) }

// BenchmarkPickTolerance is BenchmarkPick with hotcache's Tolerance and
// LatencyScale.
func BenchmarkPickTolerance(b *testing.B) {
	benchPick(b, router.PickerConfig{Tolerance: 0.1, LatencyScale: 5 * time.Millisecond})
}

func benchPick(b *testing.B, cfg router.PickerConfig) {
	tab := router.NewTable(router.Config{})
	if err := tab.Update(nodeSet("redis", 6)); err != nil {
		b.Fatal(err)
	}
	p, err := router.NewPicker(tab, cfg)
	if err != nil {
		b.Fatal(err)
	}
	for i, n := range tab.Ring().Nodes() {
		p.Observe(n.ID, router.Sample{HitRatio: 0.9, Load: float64(i) / 10, Latency: time.Millisecond})
	}
	keys := keys16(1 << 16)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.Pick(keys[i&(len(keys)-1)])
		i++
	}
}

// TestPickTolerance: with Tolerance, Pick spreads a key's picks evenly over
// the candidates within Tolerance of the best, and never picks one below
// that or an unhealthy one.
func TestPickTolerance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key, picks = "item:5", 30000
		tab, p := newPicker(t, nodeSet("n", 6), router.PickerConfig{Candidates: 4, Tolerance: 0.1})
		c := tab.Ring().LookupN(key, 4, nil)
		near := router.Sample{HitRatio: 1, Load: 0.1, Latency: 200 * time.Microsecond}
		far := router.Sample{HitRatio: 1, Load: 0.1, Latency: 20 * time.Millisecond} // ~0.18 below the best
		for range 5 {
			p.Observe(c[0].ID, good)
			p.Observe(c[1].ID, near)
			p.Observe(c[2].ID, far)
			p.Observe(c[3].ID, good)
			time.Sleep(100 * time.Millisecond)
		}
		count := func() map[string]int {
			got := map[string]int{}
			for range picks {
				n, _ := p.Pick(key)
				got[n.ID]++
			}
			return got
		}
		got := count()
		for _, n := range []router.Node{c[0], c[1], c[3]} {
			if share := float64(got[n.ID]) / picks; share < 0.30 || share > 0.37 {
				t.Errorf("near-best %s: %.3f of the picks, want 1/3 within [0.30, 0.37] (picks %v)", n.ID, share, got)
			}
		}
		if got[c[2].ID] != 0 {
			t.Errorf("%s, ~0.18 below the best, picked %d times, want 0", c[2].ID, got[c[2].ID])
		}
		p.MarkUnhealthy(c[0].ID)
		got = count()
		if got[c[0].ID] != 0 || got[c[1].ID] == 0 || got[c[3].ID] == 0 {
			t.Errorf("owner unhealthy: picks %v, want none on %s and some on %s and %s", got, c[0].ID, c[1].ID, c[3].ID)
		}
	})
}
