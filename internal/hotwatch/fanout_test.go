package hotwatch

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// BenchmarkFanout measures how long a hot-set change takes to reach many
// watching apps: 500 ZooKeeper sessions (HOTSPOT_FANOUT_WATCHERS), each with
// its own Watcher of one app, as 500 app instances would have, spread evenly
// over the servers HOTSPOT_ZK lists (an ensemble: `stack.sh env --cluster`).
// Each iteration publishes a new key in a shard node and waits until every
// watcher has it; the reported percentiles are over every (change, watcher)
// pair, from the write's acknowledgement to the watcher's OnChange.
//
//	go test -run '^$' -bench Fanout -benchtime 20x ./internal/hotwatch
func BenchmarkFanout(b *testing.B) {
	watchers := 500
	if v := os.Getenv("HOTSPOT_FANOUT_WATCHERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("HOTSPOT_FANOUT_WATCHERS=%q: want a count", v)
		}
		watchers = n
	}
	servers := strings.Split(stacktest.ZK(b), ",")
	addr := servers[0]
	root := "/" + stacktest.Name(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	writer, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		b.Fatal(err)
	}
	defer writer.Close()
	defer deleteTree(writer, root)
	shardPath := hotset.ShardPath(root, "shop", "s1")
	if err := zkgroup.EnsurePath(writer, shardPath); err != nil {
		b.Fatal(err)
	}

	var mu sync.Mutex
	arrived := make(map[string][]time.Time) // key -> when each watcher saw it
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ready := make([]<-chan struct{}, 0, watchers)
	for i := range watchers {
		s, err := zkgroup.Connect(ctx, []string{servers[i%len(servers)]}, zkgroup.Config{SessionTimeout: 20 * time.Second})
		if err != nil {
			b.Fatalf("session %d: %v", i, err)
		}
		defer s.Close()
		w, err := New(s, Config{Root: root, App: "shop", OnChange: func(c Change) {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range c.Added {
				arrived[k.Key] = append(arrived[k.Key], c.At)
			}
		}})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { w.Run(ctx) })
		ready = append(ready, w.Ready())
	}
	for _, r := range ready {
		<-r
	}

	var delays []time.Duration
	b.ResetTimer()
	for i := range b.N {
		key := fmt.Sprintf("k%d", i)
		data, err := hotset.Encode(&hotset.Shard{App: "shop", Shard: "s1", Updated: time.Now().UnixMilli(),
			TTL: 60_000, Keys: []hotset.Key{{Key: key, Rate: 1000, Since: time.Now().UnixMilli()}}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := writer.Set(shardPath, data, -1); err != nil {
			b.Fatal(err)
		}
		written := time.Now()
		deadline := written.Add(10 * time.Second)
		for {
			mu.Lock()
			n := len(arrived[key])
			if n == watchers {
				for _, at := range arrived[key] {
					delays = append(delays, max(at.Sub(written), 0))
				}
			}
			mu.Unlock()
			if n == watchers {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("change %d reached %d of %d watchers in 10s", i, n, watchers)
			}
			time.Sleep(time.Millisecond)
		}
	}
	b.StopTimer()
	slices.Sort(delays)
	pct := func(p float64) float64 {
		return float64(delays[min(int(p*float64(len(delays))), len(delays)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
	b.ReportMetric(0, "ns/op")
}
