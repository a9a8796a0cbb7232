package hotwatch

import (
	"fmt"
	"maps"
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
	whole, err := New(s, Config{Root: zw.root, App: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	whole.watch = wholeNodes(s, zw.root)
	runStarted(t, whole)

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
		for name, w := range map[string]*Watcher{"parts": parts, "whole node": whole} {
			waitSnapshot(t, w, fmt.Sprintf("step %d (%s), %s reader", step, op, name), want)
		}
	}
}

// waitSnapshot waits until w's hot keys of "shop" are want: the same keys
// with the same rate, since, rule and kind.
func waitSnapshot(t *testing.T, w *Watcher, what string, want map[string]hotset.Key) {
	t.Helper()
	same := func(a, b hotset.Key) bool {
		return a.Key == b.Key && a.Rate == b.Rate && a.Since == b.Since && sameReason(a, b) && a.Kind == b.Kind
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

// putParts writes app's shard as part nodes and a lease (nil: none) with
// keys, in a fake ZooKeeper.
func putParts(t *testing.T, f *fakeZK, app, shard string, lease *hotset.Lease, keys ...hotset.Key) {
	t.Helper()
	f.set(hotset.PartsAppDir(root, app), hotset.Escape(shard), []byte{})
	dir := hotset.PartsShardDir(root, app, shard)
	for i, pk := range hotset.Split(&hotset.Shard{Keys: keys}, hotset.NumParts) {
		b, err := hotset.EncodePart(pk)
		if err != nil {
			t.Fatal(err)
		}
		f.set(dir, hotset.PartName(i), b)
	}
	if lease != nil {
		f.set(dir, hotset.LeaseNode, hotset.EncodeLease(*lease))
	} else {
		f.set(dir, hotset.LeaseNode, nil)
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
				putParts(t, f, "shop", "agg-1", &l, ab...)
			}, []string{"a", "b"}},
			{"a lease that does not decode", func() {
				f.set(hotset.PartsShardDir(root, "shop", "agg-1"), hotset.LeaseNode, []byte(`{"v":1,"ttl":-1}`))
			}, []string{"a", "b"}},
			{"valid parts with the same keys", func() { putParts(t, f, "shop", "agg-1", lease, ab...) }, []string{"a", "b"}},
			{"the shard node changes alone", func() {
				putShard(t, f, "shop", "agg-1", now, 10*time.Second, hotset.Key{Key: "x", Rate: 1})
			}, []string{"a", "b"}},
			{"the parts change", func() {
				putParts(t, f, "shop", "agg-1", lease, hotset.Key{Key: "a", Rate: 10}, hotset.Key{Key: "c", Rate: 1})
			}, []string{"a", "c"}},
			{"the lease goes: the shard node is back in charge", func() {
				putShard(t, f, "shop", "agg-1", now, 10*time.Second, hotset.Key{Key: "a", Rate: 10}, hotset.Key{Key: "c", Rate: 1})
				putParts(t, f, "shop", "agg-1", nil)
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
