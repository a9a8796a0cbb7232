package hotwatch

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/internal/zkpublish"
)

// TestZKPartsSeeEveryChange publishes a random run of promotions,
// demotions, rate and reason changes and renewals through the real
// publisher, and checks after each that a watcher following the parts and
// one reading the whole shard node (as readers before the parts did) both
// converge to exactly what was published. A second shard is written by an
// older writer (a shard node and no parts) and a third goes away with
// Remove: the parts reader merges all of them.
func TestZKPartsSeeEveryChange(t *testing.T) {
	addr := stacktest.ZK(t)
	zw := newZKWriter(t, addr)
	s, err := zkgroup.Connect(t.Context(), []string{addr}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	pub, err := zkpublish.New(s, zkpublish.Config{Root: zw.root})
	if err != nil {
		t.Fatal(err)
	}
	parts := runWatcher(t, s, Config{Root: zw.root, App: "shop"})
	whole := runWatcher(t, s, Config{Root: zw.root, App: "shop", WholeNodes: true})

	zw.put("shop", "old-writer", "legacy")
	gone := &hotset.Shard{App: "shop", Shard: "gone", TTL: 60_000, Updated: time.Now().UnixMilli(),
		Keys: []hotset.Key{{Key: "leaving", Rate: 1}}}
	if err := pub.Publish(t.Context(), gone); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	sh := &hotset.Shard{App: "shop", Shard: "agg-1", TTL: 60_000}
	next := 0
	for step := range 80 {
		op := "renewal"
		switch r := rng.IntN(10); {
		case r < 3 || len(sh.Keys) < 5:
			op = "promotion"
			sh.Keys = append(sh.Keys, hotset.Key{Key: fmt.Sprintf("k%d", next), Rate: 1000 * rng.Float64(), Since: int64(next)})
			next++
		case r < 5:
			op = "demotion"
			i := rng.IntN(len(sh.Keys))
			sh.Keys = slices.Delete(sh.Keys, i, i+1)
		case r < 7:
			op = "rate"
			sh.Keys[rng.IntN(len(sh.Keys))].Rate *= 1.05
		case r < 9:
			op = "reason"
			rule := rng.IntN(3)
			k := &sh.Keys[rng.IntN(len(sh.Keys))]
			k.Rule, k.Kind = &rule, []string{"count", "bytes", "write"}[rng.IntN(3)]
		}
		sh.Updated = time.Now().UnixMilli()
		if err := pub.Publish(t.Context(), sh); err != nil {
			t.Fatal(err)
		}
		if step == 40 {
			if err := pub.Remove(t.Context(), "shop", "gone"); err != nil {
				t.Fatal(err)
			}
		}
		want := map[string]hotset.Key{"legacy": {Key: "legacy", Rate: 2000}}
		if step < 40 {
			want["leaving"] = gone.Keys[0]
		}
		for _, k := range sh.Keys {
			want[k.Key] = k
		}
		waitSnapshot(t, whole, fmt.Sprintf("step %d (%s), whole-node reader", step, op), want, 0)
		// The lease carries rates rounded to three digits, and a part
		// newer than the lease its own (hotset.RateMove).
		waitSnapshot(t, parts, fmt.Sprintf("step %d (%s), parts reader", step, op), want, hotset.RateMove+0.005)
	}
}

// waitSnapshot waits until w's hot keys of "shop" are want: the same keys
// with the same since, rule and kind, and a rate within slack of want's.
func waitSnapshot(t *testing.T, w *Watcher, what string, want map[string]hotset.Key, slack float64) {
	t.Helper()
	same := func(a, b hotset.Key) bool {
		return a.Key == b.Key && math.Abs(a.Rate-b.Rate) <= slack*b.Rate && a.Since == b.Since && sameReason(a, b) && a.Kind == b.Kind
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := map[string]hotset.Key{}
		for _, k := range w.Snapshot().App("shop") {
			got[k.Key] = k
		}
		if maps.EqualFunc(got, want, same) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d hot keys, want %d (%v)", what, len(got), len(want), slices.Sorted(maps.Keys(got)))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// putParts writes app's shard as part nodes of generation gen and a lease
// with keys, in a fake ZooKeeper. The lease carries the keys' rates times
// leaseRate for parts of generation gen.
func putParts(t *testing.T, f *fakeZK, app, shard string, gen uint64, lease *hotset.Lease, leaseRate float64, keys ...hotset.Key) {
	t.Helper()
	f.set(hotset.PartsAppDir(root, app), hotset.Escape(shard), []byte{})
	dir := hotset.PartsShardDir(root, app, shard)
	var gens []uint64
	var rates [][]float64
	for i, pk := range hotset.Split(&hotset.Shard{Keys: keys}, hotset.NumParts) {
		b, err := hotset.EncodePart(gen, pk)
		if err != nil {
			t.Fatal(err)
		}
		f.set(dir, hotset.PartName(i), b)
		gens = append(gens, gen)
		rates = append(rates, []float64{})
		for _, k := range pk {
			rates[i] = append(rates[i], k.Rate*leaseRate)
		}
	}
	l := *lease
	l.Gen, l.Rates = gens, rates
	b, err := hotset.EncodeLease(l)
	if err != nil {
		t.Fatal(err)
	}
	f.set(dir, hotset.LeaseNode, b)
}

// removeParts deletes app's shard's part nodes as the publisher does: the
// lease first, so that no reader sees the parts go under a valid lease.
func removeParts(f *fakeZK, app, shard string) {
	dir := hotset.PartsShardDir(root, app, shard)
	f.set(dir, hotset.LeaseNode, nil)
	for i := range hotset.NumParts {
		f.set(dir, hotset.PartName(i), nil)
	}
}

// TestPartsTakeOverAndBack checks the moves between a shard's two forms,
// as when its aggregator is upgraded or rolled back: the keys never leave
// the snapshot on the way (no Change), a lease whose parts are not all
// there yet or that does not decode leaves the shard node in charge, and
// once the lease is valid the shard node no longer counts.
func TestPartsTakeOverAndBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeZK()
		w, rec := start(t, f, "shop")
		now := time.Now()
		ab := []hotset.Key{{Key: "a", Rate: 10}, {Key: "b", Rate: 5}}
		putShard(t, f, "shop", "agg-1", now, 10*time.Second, ab...)
		synctest.Wait()
		<-w.Ready()
		lease := &hotset.Lease{App: "shop", Shard: "agg-1", Updated: now.UnixMilli(), TTL: 10_000, Parts: hotset.NumParts}

		steps := []struct {
			name string
			do   func()
			want []string
		}{
			{"a lease naming more parts than there are", func() {
				l := *lease
				l.Parts = hotset.NumParts + 1
				putParts(t, f, "shop", "agg-1", 1, &l, 1, ab...)
			}, []string{"a", "b"}},
			{"a lease that does not decode", func() {
				f.set(hotset.PartsShardDir(root, "shop", "agg-1"), hotset.LeaseNode, []byte(`{"v":1,"ttl":-1}`))
			}, []string{"a", "b"}},
			{"valid parts with the same keys", func() { putParts(t, f, "shop", "agg-1", 1, lease, 1, ab...) }, []string{"a", "b"}},
			{"the shard node changes alone", func() {
				putShard(t, f, "shop", "agg-1", now, 10*time.Second, hotset.Key{Key: "x", Rate: 1})
			}, []string{"a", "b"}},
			{"the parts change", func() {
				putParts(t, f, "shop", "agg-1", 2, lease, 1, hotset.Key{Key: "a", Rate: 10}, hotset.Key{Key: "c", Rate: 1})
			}, []string{"a", "c"}},
			{"the lease goes: the shard node is back in charge", func() {
				putShard(t, f, "shop", "agg-1", now, 10*time.Second, hotset.Key{Key: "a", Rate: 10}, hotset.Key{Key: "c", Rate: 1})
				removeParts(f, "shop", "agg-1")
			}, []string{"a", "c"}},
			{"the shard node changes", func() {
				putShard(t, f, "shop", "agg-1", now, 10*time.Second, hotset.Key{Key: "a", Rate: 10})
			}, []string{"a"}},
		}
		for _, st := range steps {
			n := len(rec.all())
			st.do()
			synctest.Wait()
			if got := keysOf(w.Snapshot(), "shop"); !slices.Equal(got, st.want) {
				t.Errorf("%s: hot keys %v, want %v", st.name, got, st.want)
			}
			for _, c := range rec.all()[n:] {
				for _, k := range c.Removed {
					if slices.Contains(st.want, k) {
						t.Errorf("%s: %q removed on the way", st.name, k)
					}
				}
			}
		}
	})
}

// TestPartRatesFromTheLease checks that a key's rate is the lease's when the
// lease is for the generation of the key's part, and the part's otherwise.
func TestPartRatesFromTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeZK()
		w, _ := start(t, f, "shop")
		lease := &hotset.Lease{App: "shop", Shard: "agg-1", Updated: time.Now().UnixMilli(), TTL: 10_000, Parts: hotset.NumParts}
		putShard(t, f, "shop", "agg-1", time.Now(), 10*time.Second, hotset.Key{Key: "a", Rate: 1})
		tests := []struct {
			name      string
			gen       uint64
			leaseRate float64
			want      float64
		}{
			{"the lease is for the part", 1, 2, 200},
			{"the rates move in the lease", 1, 3, 300},
			{"the part is newer than the lease", 2, 0, 100}, // leaseRate 0: the lease keeps gen 1
		}
		for _, tt := range tests {
			if tt.leaseRate == 0 {
				b, err := hotset.EncodePart(tt.gen, []hotset.Key{{Key: "a", Rate: 100}})
				if err != nil {
					t.Fatal(err)
				}
				f.set(hotset.PartsShardDir(root, "shop", "agg-1"), hotset.PartName(hotset.PartOf("a", hotset.NumParts)), b)
			} else {
				putParts(t, f, "shop", "agg-1", tt.gen, lease, tt.leaseRate, hotset.Key{Key: "a", Rate: 100})
			}
			synctest.Wait()
			if k, ok := w.Snapshot().Key("shop", "a"); !ok || k.Rate != tt.want {
				t.Errorf("%s: a = %+v, %v; want rate %v", tt.name, k, ok, tt.want)
			}
		}
	})
}
