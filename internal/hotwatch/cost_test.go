package hotwatch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/promtest"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/internal/zkpublish"
)

// TestZKChangeCost measures what one hot-set change costs one watcher, on
// the real ZooKeeper of the local stack: an app's shard of n keys is
// published through the real publisher, then changed in one of the ways an
// aggregator rewrites it (with every rate recomputed, as the aggregator
// does), and the watcher's ZooKeeper reads and the bytes of node data they
// returned are counted (zkgroup's watch counters). Two watchers are
// measured: one that reads the whole shard node (Config.WholeNodes), as
// readers before the part nodes did, and one that follows the parts. At
// 1,000 keys the second must read at most half the bytes of the first. Run
// with -v for the table:
//
//	go test -run TestZKChangeCost -v ./internal/hotwatch
func TestZKChangeCost(t *testing.T) {
	addr := stacktest.ZK(t)
	for _, tc := range []struct {
		n     int
		parts bool
	}{{10, false}, {100, false}, {1000, false}, {10, true}, {100, true}, {1000, true}} {
		reader := "whole node"
		if tc.parts {
			reader = "parts"
		}
		n := tc.n
		t.Run(fmt.Sprintf("%s/%d", reader, n), func(t *testing.T) {
			zw := newZKWriter(t, addr) // for the root's cleanup
			ws, err := zkgroup.Connect(t.Context(), []string{addr}, zkgroup.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ws.Close)
			pub, err := zkpublish.New(ws, zkpublish.Config{Root: zw.root})
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			rs, err := zkgroup.Connect(t.Context(), []string{addr}, zkgroup.Config{Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rs.Close)

			sh := costShard(n)
			// The aggregator recomputes every rate at every write: each
			// write publishes every key's rate moved by up to 0.9 % from
			// its base in sh (a rate refresh moves one base by 5 %).
			publish := func() {
				t.Helper()
				out := *sh
				out.Keys = slices.Clone(sh.Keys)
				for i := range out.Keys {
					out.Keys[i].Rate *= 1 + 0.018*(rand.Float64()-0.5)
				}
				out.Updated = time.Now().UnixMilli()
				if err := pub.Publish(t.Context(), &out); err != nil {
					t.Fatal(err)
				}
			}
			publish()
			w := runWatcher(t, rs, Config{Root: zw.root, App: "shop", Registerer: reg, WholeNodes: !tc.parts})
			<-w.Ready()
			waitLen(t, w, "shop", n)
			t.Logf("%4d keys, %-12s: %2.0f reads, %7.0f bytes for the first read", n, "start",
				promtest.Counter(t, reg, "hotspot_zk_watch_reads_total"), promtest.Counter(t, reg, "hotspot_zk_watch_read_bytes_total"))

			steps := []struct {
				name   string
				change func()
				want   int // hot keys after the change
			}{
				{"promotion", func() { sh.Keys = append(sh.Keys, costKey(n, 1000)) }, n + 1},
				{"demotion", func() { sh.Keys = slices.Delete(sh.Keys, n/2, n/2+1) }, n},
				{"rate refresh", func() { sh.Keys[0].Rate *= 1.05 }, n},
				{"renewal", func() {}, n},
			}
			for _, st := range steps {
				reads, bytes := promtest.Counter(t, reg, "hotspot_zk_watch_reads_total"), promtest.Counter(t, reg, "hotspot_zk_watch_read_bytes_total")
				events := promtest.Counter(t, reg, "hotspot_hotwatch_events_total")
				st.change()
				publish()
				waitCounter(t, reg, "hotspot_hotwatch_events_total", events+1)
				waitLen(t, w, "shop", st.want)
				dr := promtest.Counter(t, reg, "hotspot_zk_watch_reads_total") - reads
				db := promtest.Counter(t, reg, "hotspot_zk_watch_read_bytes_total") - bytes
				t.Logf("%4d keys, %-12s: %2.0f reads, %7.0f bytes per watcher per change", n, st.name, dr, db)
				if dr < 1 || db < 1 {
					t.Errorf("%s: %v reads, %v bytes: the watcher read nothing", st.name, dr, db)
				}
				whole, err := hotset.Encode(sh)
				if err != nil {
					t.Fatal(err)
				}
				if tc.parts && n >= 1000 && db > float64(len(whole))/2 {
					t.Errorf("%s: %v bytes read, want at most half the shard node's %d", st.name, db, len(whole))
				}
			}
		})
	}
}

// costShard is a node of n keys as the aggregator writes them: the default
// rule, count kind, rates around 1,000-10,000/s, sorted by rate.
func costShard(n int) *hotset.Shard {
	sh := &hotset.Shard{App: "shop", Shard: "agg-1", TTL: 10_000}
	for i := range n {
		sh.Keys = append(sh.Keys, costKey(i, 1000+9000*rand.Float64()))
	}
	slices.SortFunc(sh.Keys, func(a, b hotset.Key) int {
		switch {
		case a.Rate > b.Rate:
			return -1
		case a.Rate < b.Rate:
			return 1
		}
		return 0
	})
	return sh
}

func costKey(i int, rate float64) hotset.Key {
	rule := -1
	return hotset.Key{Key: fmt.Sprintf("item:%08d", 1_000_000+i*7919), Rate: rate,
		Since: time.Now().UnixMilli() - int64(i), Rule: &rule, Kind: "count"}
}

// counter returns the value of the counter name in reg (0 if not there).
func waitCounter(t *testing.T, reg *prometheus.Registry, name string, atLeast float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for promtest.Counter(t, reg, name) < atLeast {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want >= %v", name, promtest.Counter(t, reg, name), atLeast)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitLen(t *testing.T, w *Watcher, app string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for w.Snapshot().Len(app) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d hot keys, want %d", app, w.Snapshot().Len(app), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
