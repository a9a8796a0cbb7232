package zkpublish_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hotspot-dev/hotspot/aggregator"
	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/internal/zkpublish"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// session connects to the test ZooKeeper and returns a unique root that is
// deleted at the end of the test.
func session(t *testing.T) (*zkgroup.Session, string) {
	t.Helper()
	addr := stacktest.ZK(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := zkgroup.Connect(ctx, []string{addr}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	root := "/" + stacktest.Name(t)
	conn := stacktest.ZKConn(t) // registered first: closed after the cleanup below
	t.Cleanup(func() {
		deleteTree(conn, root)
		s.Close()
	})
	return s, root
}

func deleteTree(conn *zk.Conn, p string) {
	kids, _, _ := conn.Children(p)
	for _, k := range kids {
		deleteTree(conn, path.Join(p, k))
	}
	_ = conn.Delete(p, -1)
}

func publisher(t *testing.T, s *zkgroup.Session, root string) *zkpublish.Publisher {
	t.Helper()
	p, err := zkpublish.New(s, zkpublish.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run starts a in the background and returns a function that stops it and
// checks Run's result.
func run(t *testing.T, a *aggregator.Aggregator) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return 10s after cancel")
		}
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond every 20ms until it holds or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func detectionLatency(t *testing.T, reg *prometheus.Registry) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "hotspot_aggregator_detection_latency_seconds" {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatal("no detection latency histogram")
	return nil
}

func readShard(t *testing.T, conn *zk.Conn, root, app, shard string) (*hotset.Shard, *zk.Stat) {
	t.Helper()
	data, stat, err := conn.Get(hotset.ShardPath(root, app, shard))
	if err == zk.ErrNoNode {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := hotset.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return s, stat
}

func TestPublishedNodeBatchingAndMembership(t *testing.T) {
	t.Parallel()
	s, root := session(t)
	reg := prometheus.NewRegistry()
	a, err := aggregator.New(aggregator.Config{ID: "shard/1", Addr: "127.0.0.1:7001", Registerer: reg}, publisher(t, s, root))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, a)
	members := hotset.AggregatorsDir(root)
	eventually(t, 5*time.Second, "membership", func() bool {
		data, _, err := stacktest.ZKConn(t).Get(path.Join(members, hotset.Escape("shard/1")))
		m, derr := hotset.DecodeMember(data)
		return err == nil && derr == nil && m == hotset.Member{V: 1, ID: "shard/1", Addr: "127.0.0.1:7001"}
	})

	start := time.Now()
	var want []string
	for i := range 20 { // 20 promotions in a burst: one write at once, the rest batched
		k := fmt.Sprintf("item:%02d", i)
		add(t, a, "my app", k, uint64(2000+i))
		want = append(want, k)
	}
	slices.Reverse(want) // by rate, descending
	var node *hotset.Shard
	var stat *zk.Stat
	eventually(t, 2*time.Second, "all 20 keys published", func() bool {
		node, stat = readShard(t, stacktest.ZKConn(t), root, "my app", "shard/1")
		return node != nil && len(node.Keys) == 20
	})
	var got []string
	for _, k := range node.Keys {
		got = append(got, k.Key)
	}
	if !slices.Equal(got, want) || node.App != "my app" || node.Shard != "shard/1" || node.TTL != 10000 ||
		node.Keys[0].Rate != 2019 || time.UnixMilli(node.Updated).Before(start.Add(-time.Second)) {
		t.Errorf("node = %+v", node)
	}
	if stat.Version > 1 {
		t.Errorf("20 promotions in a burst took %d writes, want at most 2", stat.Version+1)
	}
	h := detectionLatency(t, reg)
	within := uint64(0) // observations <= 1s
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == 1 {
			within = b.GetCumulativeCount()
		}
	}
	if h.GetSampleCount() != 20 || within != 20 {
		t.Errorf("detection latency: %d observations, %d within 1s; want 20, 20", h.GetSampleCount(), within)
	}
	t.Logf("detection latency (crossing bucket -> ZooKeeper ack): mean %v over %d keys",
		time.Duration(h.GetSampleSum()/float64(h.GetSampleCount())*1e9), h.GetSampleCount())

	// Shutdown publishes the final state and leaves the group.
	stop()
	if ok, _, _ := stacktest.ZKConn(t).Exists(path.Join(members, hotset.Escape("shard/1"))); ok {
		t.Error("member node still there after Run returned")
	}
	if node, _ := readShard(t, stacktest.ZKConn(t), root, "my app", "shard/1"); node == nil || len(node.Keys) != 20 {
		t.Errorf("final node = %+v, want the 20 keys kept for readers", node)
	}
}

func TestRestartRebuildsFromZooKeeper(t *testing.T) {
	t.Parallel()
	s, root := session(t)
	cfg := aggregator.Config{ID: "s1", Addr: "127.0.0.1:7002", Hold: 300 * time.Millisecond}
	a, err := aggregator.New(cfg, publisher(t, s, root))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, a)
	add(t, a, "app", "kept", 5000)
	add(t, a, "app", "dropped", 5000)
	eventually(t, 2*time.Second, "first incarnation's node", func() bool {
		n, _ := readShard(t, stacktest.ZKConn(t), root, "app", "s1")
		return n != nil && len(n.Keys) == 2
	})
	stop()
	first, _ := readShard(t, stacktest.ZKConn(t), root, "app", "s1")

	// The restarted shard holds both keys hot from the node at once.
	b, err := aggregator.New(cfg, publisher(t, s, root))
	if err != nil {
		t.Fatal(err)
	}
	run(t, b)
	eventually(t, 2*time.Second, "restored keys", func() bool {
		st, ok := b.Key("app", "dropped")
		return ok && st.Hot
	})
	i := slices.IndexFunc(first.Keys, func(k hotset.Key) bool { return k.Key == "kept" })
	st, _ := b.Key("app", "kept")
	if i < 0 || !st.Hot || st.Since.UnixMilli() != first.Keys[i].Since {
		t.Errorf("restored key = %+v, want hot since that of %+v", st, first.Keys)
	}
	// The live stream confirms one key; the other ages out after one window
	// plus the hold.
	restart := time.Now()
	eventually(t, 5*time.Second, "unconfirmed key dropped from the node", func() bool {
		add(t, b, "app", "kept", 200)
		n, _ := readShard(t, stacktest.ZKConn(t), root, "app", "s1")
		return n != nil && len(n.Keys) == 1 && n.Keys[0].Key == "kept"
	})
	if d := time.Since(restart); d < time.Second {
		t.Errorf("unconfirmed restored key dropped after %v, want >= window + hold", d)
	}
}

func TestCollectDeletesDeadShardsAfterTwiceTTL(t *testing.T) {
	t.Parallel()
	s, root := session(t)
	p := publisher(t, s, root)
	const ttl = 500 * time.Millisecond
	ctx := t.Context()

	// A live member with a stale node is never collected.
	zombieCtx, leaveZombie := context.WithCancel(ctx)
	defer leaveZombie()
	go p.Join(zombieCtx, hotset.Member{ID: "zombie", Addr: "127.0.0.1:1"})
	old := time.Now().Add(-time.Hour).UnixMilli()
	written := time.Now() // no later than the dead nodes' Updated
	for _, sh := range []*hotset.Shard{
		{App: "app", Shard: "zombie", Updated: old, TTL: ttl.Milliseconds(), Keys: []hotset.Key{{Key: "z"}}},
		{App: "app", Shard: "dead", Updated: time.Now().UnixMilli(), TTL: ttl.Milliseconds(), Keys: []hotset.Key{{Key: "d"}}},
		{App: "gone", Shard: "dead", Updated: time.Now().UnixMilli(), TTL: ttl.Milliseconds()},
	} {
		if err := p.Publish(ctx, sh); err != nil {
			t.Fatal(err)
		}
	}

	a, err := aggregator.New(aggregator.Config{ID: "a-live", Addr: "127.0.0.1:7003",
		TTL: ttl, Renew: 150 * time.Millisecond, GCInterval: 100 * time.Millisecond}, p)
	if err != nil {
		t.Fatal(err)
	}
	run(t, a)
	add(t, a, "app", "live", 5000)
	eventually(t, 5*time.Second, "dead shard's node collected", func() bool {
		n, _ := readShard(t, stacktest.ZKConn(t), root, "app", "dead")
		return n == nil
	})
	if d := time.Since(written); d < 2*ttl {
		t.Errorf("dead shard's node deleted %v after its write, want >= 2*TTL = %v", d, 2*ttl)
	}
	eventually(t, 2*time.Second, "emptied app folder deleted", func() bool {
		ok, _, _ := stacktest.ZKConn(t).Exists(hotset.AppDir(root, "gone"))
		return !ok
	})
	if n, _ := readShard(t, stacktest.ZKConn(t), root, "app", "zombie"); n == nil {
		t.Error("a member's node was collected")
	}
	if n, _ := readShard(t, stacktest.ZKConn(t), root, "app", "a-live"); n == nil || len(n.Keys) != 1 {
		t.Errorf("live shard's node = %+v, want its key", n)
	}
}

func TestCollectLeavesWorkToSmallestMember(t *testing.T) {
	t.Parallel()
	s, root := session(t)
	p := publisher(t, s, root)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go p.Join(ctx, hotset.Member{ID: "a", Addr: "127.0.0.1:1"})
	eventually(t, 5*time.Second, "member a", func() bool {
		kids, _, _ := stacktest.ZKConn(t).Children(hotset.AggregatorsDir(root))
		return len(kids) == 1
	})
	if err := p.Publish(ctx, &hotset.Shard{App: "app", Shard: "dead", Updated: 1, TTL: 1}); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Collect(ctx, "b", time.Millisecond); n != 0 || err != nil {
		t.Errorf("Collect by b = %d, %v; want 0 (a collects)", n, err)
	}
	// The node's mtime is now: it becomes collectable 2ms (twice its TTL) later.
	deleted := 0
	eventually(t, 2*time.Second, "node collected by a", func() bool {
		n, err := p.Collect(ctx, "a", time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		deleted += n
		return deleted > 0
	})
	if deleted != 1 {
		t.Errorf("Collect by a deleted %d nodes, want 1", deleted)
	}
	if ok, _, _ := stacktest.ZKConn(t).Exists(hotset.PartsShardDir(root, "app", "dead")); ok {
		t.Error("the dead shard's part folder was not collected with its node")
	}
}

// TestPublishParts checks the two forms of a published shard: the shard
// node, byte for byte what hotset.Encode makes of it (today's readers read
// it unchanged, and the app folder holds nothing new), and the part nodes,
// of which a change of keys rewrites only those it touches, and a rate
// refresh or a renewal only the lease; read as a reader does, they hold the
// shard's keys with its rates (within hotset.RateMove).
func TestPublishParts(t *testing.T) {
	t.Parallel()
	s, root := session(t)
	p := publisher(t, s, root)
	conn := stacktest.ZKConn(t)
	ctx := t.Context()
	t0 := time.Now().UnixMilli()
	sh := &hotset.Shard{App: "app", Shard: "s/1", TTL: 10_000}
	for i := range 200 {
		sh.Keys = append(sh.Keys, hotset.Key{Key: fmt.Sprintf("item:%d", i), Rate: float64(5000 - i), Since: 1})
	}
	dir := hotset.PartsShardDir(root, "app", "s/1")
	mzxids := func() map[string]int64 {
		t.Helper()
		out := map[string]int64{}
		names, _, err := conn.Children(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			_, st, err := conn.Get(path.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			out[n] = st.Mzxid
		}
		return out
	}
	steps := []struct {
		name    string
		updated int64 // ms after t0
		change  func()
		rewrote []string // the nodes under dir it must rewrite, in any order
	}{
		{"first", 0, func() {}, append(partNames(), hotset.LeaseNode)},
		{"promotion", 100, func() { sh.Keys = append(sh.Keys, hotset.Key{Key: "new", Rate: 1, Since: 2}) },
			[]string{hotset.PartName(hotset.PartOf("new", hotset.NumParts))}},
		{"demotion", 200, func() { sh.Keys = slices.Delete(sh.Keys, 7, 8) },
			[]string{hotset.PartName(hotset.PartOf("item:7", hotset.NumParts))}},
		{"a rate moving 3 %", 300, func() { sh.Keys[0].Rate *= 1.03 }, []string{hotset.LeaseNode}},
		{"every rate moving 1 %", 400, func() {
			for i := range sh.Keys {
				sh.Keys[i].Rate *= 1.01
			}
		}, []string{hotset.LeaseNode}},
		{"renewal", 2500, func() {}, []string{hotset.LeaseNode}},
		{"reason", 2600, func() { rule := 3; sh.Keys[5].Rule = &rule }, []string{hotset.PartName(hotset.PartOf("item:5", hotset.NumParts))}},
		{"promotion with the lease due", 5000, func() { sh.Keys = append(sh.Keys, hotset.Key{Key: "newer", Rate: 1, Since: 2}) },
			[]string{hotset.PartName(hotset.PartOf("newer", hotset.NumParts)), hotset.LeaseNode}},
	}
	before := map[string]int64{}
	for _, st := range steps {
		st.change()
		sh.Updated = t0 + st.updated
		if err := p.Publish(ctx, sh); err != nil {
			t.Fatal(err)
		}
		after := mzxids()
		var rewrote []string
		for n, z := range after {
			if z != before[n] {
				rewrote = append(rewrote, n)
			}
		}
		slices.Sort(rewrote)
		slices.Sort(st.rewrote)
		if !slices.Equal(rewrote, st.rewrote) {
			t.Errorf("%s rewrote %v, want %v", st.name, rewrote, st.rewrote)
		}
		before = after

		want, err := hotset.Encode(sh)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := conn.Get(hotset.ShardPath(root, "app", "s/1"))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: shard node = %.80q, %v; want hotset.Encode's %.80q", st.name, got, err, want)
		}
		if kids, _, _ := conn.Children(hotset.AppDir(root, "app")); !slices.Equal(kids, []string{hotset.Escape("s/1")}) {
			t.Errorf("%s: app folder holds %v, want the shard node alone", st.name, kids)
		}
		data, _, err := conn.Get(path.Join(dir, hotset.LeaseNode))
		if err != nil {
			t.Fatal(err)
		}
		lease, err := hotset.DecodeLease(data)
		if err != nil {
			t.Fatal(err)
		}
		var keys []hotset.Key
		for i := range hotset.NumParts {
			data, _, err := conn.Get(path.Join(dir, hotset.PartName(i)))
			if err != nil {
				t.Fatal(err)
			}
			part, err := hotset.DecodePart(data)
			if err != nil {
				t.Fatal(err)
			}
			for j, k := range part.Keys {
				if hotset.PartOf(k.Key, hotset.NumParts) != i {
					t.Errorf("%s: key %q in part %d", st.name, k.Key, i)
				}
				if lease.Gen[i] == part.Gen {
					k.Rate = lease.Rates[i][j]
				}
				keys = append(keys, k)
			}
		}
		byKey := func(a, b hotset.Key) int { return strings.Compare(a.Key, b.Key) }
		slices.SortFunc(keys, byKey)
		wantKeys := slices.SortedFunc(slices.Values(sh.Keys), byKey)
		if !slices.EqualFunc(keys, wantKeys, func(a, b hotset.Key) bool {
			return a.Key == b.Key && math.Abs(a.Rate-b.Rate) <= (hotset.RateMove+0.006)*b.Rate &&
				(a.Rule == nil) == (b.Rule == nil) && (a.Rule == nil || *a.Rule == *b.Rule)
		}) {
			t.Errorf("%s: the parts hold %d keys, want the shard's %d, with rates within %v", st.name, len(keys), len(wantKeys), hotset.RateMove)
		}
	}
	if err := p.Remove(ctx, "app", "s/1"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{hotset.ShardPath(root, "app", "s/1"), dir} {
		if ok, _, _ := conn.Exists(n); ok {
			t.Errorf("%s still there after Remove", n)
		}
	}
	// After a Remove the next Publish writes everything again.
	if err := p.Publish(ctx, sh); err != nil {
		t.Fatal(err)
	}
	if got := len(mzxids()); got != hotset.NumParts+1 {
		t.Errorf("after Remove and Publish, %d nodes under the part folder, want %d", got, hotset.NumParts+1)
	}
}

func partNames() []string {
	var out []string
	for i := range hotset.NumParts {
		out = append(out, hotset.PartName(i))
	}
	return out
}

// BenchmarkPublish measures one write of a 100-key shard node to the real
// ZooKeeper (the node exists after the first iteration: one Set per op).
func BenchmarkPublish(b *testing.B) {
	addr := stacktest.ZK(b)
	s, err := zkgroup.Connect(b.Context(), []string{addr}, zkgroup.Config{})
	if err != nil {
		b.Fatal(err)
	}
	root := "/" + stacktest.Name(b)
	conn := stacktest.ZKConn(b)
	defer func() { deleteTree(conn, root); s.Close() }()
	p, err := zkpublish.New(s, zkpublish.Config{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	sh := &hotset.Shard{App: "app", Shard: "s1", TTL: 10000}
	for i := range 100 {
		sh.Keys = append(sh.Keys, hotset.Key{Key: fmt.Sprintf("item:%06d", i), Rate: float64(5000 - i), Since: 1})
	}
	b.ReportAllocs()
	for b.Loop() {
		sh.Updated = time.Now().UnixMilli()
		if err := p.Publish(b.Context(), sh); err != nil {
			b.Fatal(err)
		}
	}
}

// add counts n accesses of (app, key) at a as received now, the way one
// detector flush does: through the shard's internal API.
func add(t testing.TB, a *aggregator.Aggregator, app, key string, n uint64) {
	t.Helper()
	body := wire.AppendPartials(nil, &wire.PartialBatch{Source: "test", Groups: []wire.PartialGroup{
		{App: app, Entries: []wire.KeyCount{{Key: key, Count: n}}}}})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, shardapi.PartialsPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/octet-stream")
	a.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		t.Fatalf("POST partials: %d %s", rec.Code, rec.Body)
	}
}

// TestRewritesUnderSteadyLoad measures how often a real aggregator rewrites
// an app's nodes when nothing changes but the noise of the rates: n keys,
// each accessed at a steady 2,000-10,000/s with Poisson noise (100 ms
// flushes), for a few seconds once all are hot. It reports the writes per
// second of the shard node and of the part nodes, and the bytes per second
// each kind of watcher reads for them (a whole-node reader reads the node at
// every write; a parts reader reads each part or lease that was written),
// and fails if the parts do not halve those bytes at 1,000 keys. Run with -v
// for the figures:
//
//	go test -run TestRewritesUnderSteadyLoad -v ./internal/zkpublish
func TestRewritesUnderSteadyLoad(t *testing.T) {
	for _, n := range []int{10, 100, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s, root := session(t)
			a, err := aggregator.New(aggregator.Config{ID: "s1", Addr: "127.0.0.1:7001"}, publisher(t, s, root))
			if err != nil {
				t.Fatal(err)
			}
			run(t, a)
			rng := rand.New(rand.NewPCG(uint64(n), 7))
			rates := make([]float64, n)
			for i := range rates {
				rates[i] = 2000 + 8000*rng.Float64()
			}
			feed := func(d time.Duration) {
				for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
					var entries []wire.KeyCount
					for i, r := range rates {
						mean := r / 10 // per 100 ms flush
						c := max(0, math.Round(mean+math.Sqrt(mean)*rng.NormFloat64()))
						entries = append(entries, wire.KeyCount{Key: fmt.Sprintf("item:%06d", i), Count: uint64(c)})
					}
					post(t, a, "app", entries)
				}
			}
			feed(3 * time.Second) // all hot, windows full
			conn := stacktest.ZKConn(t)
			if sh, _ := readShard(t, conn, root, "app", "s1"); sh == nil || len(sh.Keys) != n {
				t.Fatalf("%d keys hot after 3 s, want %d", len(sh.Keys), n)
			}
			dir := hotset.PartsShardDir(root, "app", "s1")
			nodes := append(partNames(), hotset.LeaseNode)
			stats := func() (node *zk.Stat, parts map[string]*zk.Stat) {
				_, node, err := conn.Get(hotset.ShardPath(root, "app", "s1"))
				if err != nil {
					t.Fatal(err)
				}
				parts = map[string]*zk.Stat{}
				for _, p := range nodes {
					if _, parts[p], err = conn.Get(path.Join(dir, p)); err != nil {
						t.Fatal(err)
					}
				}
				return node, parts
			}
			const span = 5 * time.Second
			node0, parts0 := stats()
			feed(span)
			node1, parts1 := stats()
			sec := span.Seconds()
			writes := float64(node1.Version - node0.Version)
			wholeBytes := writes * float64(node1.DataLength)
			var partWrites, partBytes float64
			for _, p := range nodes {
				w := float64(parts1[p].Version - parts0[p].Version)
				partWrites += w
				partBytes += w * float64(parts1[p].DataLength)
			}
			t.Logf("%4d keys: shard node %.1f writes/s of %d B: a whole-node watcher reads %.0f B/s; "+
				"parts %.1f writes/s: a parts watcher reads %.0f B/s (%.1f parts or lease a write)",
				n, writes/sec, node1.DataLength, wholeBytes/sec, partWrites/sec, partBytes/sec, partWrites/max(writes, 1))
			if n >= 1000 && partBytes > wholeBytes/2 {
				t.Errorf("a parts watcher reads %.0f B/s, want at most half of a whole-node watcher's %.0f B/s", partBytes/sec, wholeBytes/sec)
			}
		})
	}
}

// post sends one detector flush of entries for app to a.
func post(t testing.TB, a *aggregator.Aggregator, app string, entries []wire.KeyCount) {
	t.Helper()
	body := wire.AppendPartials(nil, &wire.PartialBatch{Source: "test", Groups: []wire.PartialGroup{{App: app, Entries: entries}}})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, shardapi.PartialsPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/octet-stream")
	a.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		t.Fatalf("POST partials: %d %s", rec.Code, rec.Body)
	}
}
