package hotwatch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	watchers := fanoutWatchers(b)
	servers, writer, root, shardPath := fanoutNode(b)
	defer writer.Close()
	defer deleteTree(writer, root)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

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

	changeAndWait(b, writer, shardPath, watchers, &mu, arrived, 0)
}

// fanoutWatchers is HOTSPOT_FANOUT_WATCHERS, 500 by default.
func fanoutWatchers(b *testing.B) int {
	v := os.Getenv("HOTSPOT_FANOUT_WATCHERS")
	if v == "" {
		return 500
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("HOTSPOT_FANOUT_WATCHERS=%q: want a count", v)
	}
	return n
}

// fanoutNode connects the writer of the fan-out benchmarks to the servers
// HOTSPOT_ZK lists and makes the shard node they change, under a root of
// the benchmark's own. The caller closes writer and deletes root.
func fanoutNode(b *testing.B) (servers []string, writer *zk.Conn, root, shardPath string) {
	servers = strings.Split(stacktest.ZK(b), ",")
	root = "/" + stacktest.Name(b)
	writer, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		b.Fatal(err)
	}
	shardPath = hotset.ShardPath(root, "shop", "s1")
	if err := zkgroup.EnsurePath(writer, shardPath); err != nil {
		writer.Close()
		b.Fatal(err)
	}
	return servers, writer, root, shardPath
}

// changeAndWait is the timed part of the fan-out benchmarks: b.N times, it
// writes a new key to the shard node at shardPath and waits until arrived
// (guarded by mu) holds it for every watcher, gap apart; then it reports
// the percentiles over every (change, watcher) pair, from the write's
// acknowledgement, and the process's CPU per change.
func changeAndWait(b *testing.B, writer *zk.Conn, shardPath string, watchers int, mu *sync.Mutex, arrived map[string][]time.Time, gap time.Duration) {
	var delays []time.Duration
	cpu0 := processCPU()
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
		time.Sleep(gap)
	}
	b.StopTimer()
	// The watchers' own CPU per change: on one machine they compete with
	// the ZooKeeper servers for its cores.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "client-cpu-ms/change")
	slices.Sort(delays)
	pct := func(p float64) float64 {
		return float64(delays[min(int(p*float64(len(delays))), len(delays)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
	b.ReportMetric(0, "ns/op")
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFanoutRaw is BenchmarkFanout with the lightest client that holds
// the same watch: a bare go-zookeeper session per watcher that reads the
// shard node with a watch, and on its change reads it again (the watcher's
// one read per change), nothing else. So the client's own CPU, which on one
// machine competes with the servers for the cores (10,000 Watchers with
// their timers cost about a CPU-second per change here), stays small, and
// the figure is the ensemble's: from the write's acknowledgement until every
// session has read the new data.
//
//	HOTSPOT_FANOUT_WATCHERS=10000 go test -run '^$' -bench FanoutRaw -benchtime 20x ./internal/hotwatch
func BenchmarkFanoutRaw(b *testing.B) {
	watchers := fanoutWatchers(b)
	servers, writer, root, shardPath := fanoutNode(b)
	defer writer.Close()
	defer deleteTree(writer, root)
	var mu sync.Mutex
	arrived := make(map[string][]time.Time) // key -> when each session read it
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer wg.Wait()
	defer cancel()
	for i := range watchers {
		conn, events, err := zk.Connect([]string{servers[i%len(servers)]}, 20*time.Second,
			zk.WithLogInfo(false), zk.WithMaxBufferSize(64<<10))
		if err != nil {
			b.Fatalf("session %d: %v", i, err)
		}
		defer conn.Close()
		for ev := range events {
			if ev.State == zk.StateHasSession {
				break
			}
		}
		_, _, ch, err := conn.GetW(shardPath)
		if err != nil {
			b.Fatalf("session %d: %v", i, err)
		}
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ch:
				}
				var data []byte
				if data, _, ch, err = conn.GetW(shardPath); err != nil {
					return
				}
				at := time.Now()
				if i := bytes.Index(data, []byte(`"k":"`)); i >= 0 {
					key := data[i+5:]
					key = key[:bytes.IndexByte(key, '"')]
					mu.Lock()
					arrived[string(key)] = append(arrived[string(key)], at)
					mu.Unlock()
				}
			}
		})
	}
	changeAndWait(b, writer, shardPath, watchers, &mu, arrived, 100*time.Millisecond) // changes apart, as a busy hot set's are
}
