package aggregator

import (
	"context"
	"errors"
	"github.com/hotspot-dev/hotspot/internal/wire"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotspot-dev/hotspot/hotset"
)

// fakePub records Publisher calls with their (fake) time.
type fakePub struct {
	mu       sync.Mutex
	writes   []pubCall
	load     []*hotset.Shard
	failNext int // fail this many Publish calls
	member   hotset.Member
	joined   bool
	leftAt   time.Time
	collects []time.Duration
}

type pubCall struct {
	at     time.Time
	remove bool
	shard  hotset.Shard
}

func (f *fakePub) Publish(ctx context.Context, s *hotset.Shard) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext > 0 {
		f.failNext--
		return errors.New("injected failure")
	}
	c := *s
	c.Keys = slices.Clone(s.Keys)
	f.writes = append(f.writes, pubCall{at: time.Now(), shard: c})
	return nil
}

func (f *fakePub) Remove(ctx context.Context, app, shard string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, pubCall{at: time.Now(), remove: true, shard: hotset.Shard{App: app, Shard: shard}})
	return nil
}

func (f *fakePub) Load(ctx context.Context, shard string) ([]*hotset.Shard, error) {
	return f.load, nil
}

func (f *fakePub) Collect(ctx context.Context, self string, olderThan time.Duration) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.collects = append(f.collects, olderThan)
	return 0, nil
}

func (f *fakePub) Join(ctx context.Context, m hotset.Member) error {
	f.mu.Lock()
	f.member, f.joined = m, true
	f.mu.Unlock()
	<-ctx.Done()
	f.mu.Lock()
	f.leftAt = time.Now()
	f.mu.Unlock()
	return nil
}

func (f *fakePub) calls() []pubCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.writes)
}

func keysOf(s hotset.Shard) []string {
	var ks []string
	for _, k := range s.Keys {
		ks = append(ks, k.Key)
	}
	return ks
}

// startRun runs a in the bubble and returns a stop function that cancels it
// and returns Run's error.
func startRun(t *testing.T, a *Aggregator) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	synctest.Wait()
	return func() error { cancel(); return <-done }
}

func mustNew(t *testing.T, c Config, pub Publisher) *Aggregator {
	t.Helper()
	c.ID = "s1"
	c.Addr = "10.0.0.1:8080"
	a, err := New(c, pub)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestPublishBatching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub := &fakePub{}
		reg := prometheus.NewRegistry()
		a := mustNew(t, Config{Registerer: reg}, pub)
		stop := startRun(t, a)
		start := time.Now()

		time.Sleep(50 * time.Millisecond)
		a.Add("app", "a", 1000) // first change after quiet: published at once
		synctest.Wait()
		ws := pub.calls()
		if len(ws) != 1 || !ws[0].at.Equal(start.Add(50*time.Millisecond)) || !slices.Equal(keysOf(ws[0].shard), []string{"a"}) {
			t.Fatalf("after the first promotion: writes %+v, want one write of [a] at +50ms", ws)
		}
		s := ws[0].shard
		if s.App != "app" || s.Shard != "s1" || s.TTL != 10000 || s.Updated != ws[0].at.UnixMilli() ||
			s.Keys[0].Rate != 1000 || s.Keys[0].Since != ws[0].at.UnixMilli() {
			t.Errorf("node = %+v", s)
		}

		time.Sleep(10 * time.Millisecond)
		a.Add("app", "b", 2000) // within the interval: batched
		time.Sleep(10 * time.Millisecond)
		a.Add("app", "c", 1500)
		time.Sleep(200 * time.Millisecond)
		ws = pub.calls()
		if len(ws) != 2 {
			t.Fatalf("got %d writes, want 2: %+v", len(ws), ws)
		}
		if gap := ws[1].at.Sub(ws[0].at); gap < 100*time.Millisecond || gap > 200*time.Millisecond {
			t.Errorf("second write %v after the first, want within [100ms, 200ms]", gap)
		}
		if got, want := keysOf(ws[1].shard), []string{"b", "c", "a"}; !slices.Equal(got, want) {
			t.Errorf("batched node keys = %v, want %v (by rate)", got, want)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if n := histogramCount(t, reg, "hotspot_aggregator_detection_latency_seconds"); n != 3 {
			t.Errorf("detection latency observations = %d, want 3", n)
		}
	})
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

func TestRenewDemoteRemoveAndLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub := &fakePub{}
		a := mustNew(t, Config{TTL: 3 * time.Second, Renew: time.Second, GCInterval: 2 * time.Second}, pub)
		stop := startRun(t, a)
		start := time.Now()
		pub.mu.Lock()
		if !pub.joined || pub.member != (hotset.Member{ID: "s1", Addr: "10.0.0.1:8080"}) {
			t.Errorf("joined %v as %+v", pub.joined, pub.member)
		}
		pub.mu.Unlock()

		// Hot for 5 s: one write at promotion (1200 accesses, +350ms), a
		// rewrite at the first sweep after RateRefresh (500ms) as the rate
		// climbed, then a renewal every second. The accesses arrive halfway
		// between sweeps, counted at receipt (Add has no event time): a
		// sweep sees 9 of the 10 last ones.
		time.Sleep(50 * time.Millisecond)
		for range 50 {
			a.Add("app", "k", 300)
			time.Sleep(100 * time.Millisecond)
		}
		ws := pub.calls()
		var rates []float64
		var gaps []time.Duration
		for i, w := range ws {
			rates = append(rates, w.shard.Keys[0].Rate)
			if i > 0 {
				gaps = append(gaps, w.at.Sub(ws[i-1].at))
			}
		}
		wantRates := []float64{1200, 2700, 2700, 2700, 2700, 2700}
		wantGaps := []time.Duration{550 * time.Millisecond, time.Second, time.Second, time.Second, time.Second}
		if !slices.Equal(rates, wantRates) || !slices.Equal(gaps, wantGaps) {
			t.Fatalf("writes while hot for 5s: rates %v gaps %v, want %v %v", rates, gaps, wantRates, wantGaps)
		}
		n0 := len(ws)

		// Stop the traffic (the detectors still send their empty rounds):
		// cold after the window empties below the low mark plus the hold,
		// then an empty node, removed after a TTL.
		stopAt := time.Now()
		heartbeats(t, a, 10*time.Second)
		ws = pub.calls()[n0:]
		var demoted, removed time.Duration
		for _, w := range ws {
			switch {
			case w.remove:
				removed = w.at.Sub(stopAt)
			case len(w.shard.Keys) == 0 && demoted == 0:
				demoted = w.at.Sub(stopAt)
			}
		}
		// 3000/s falls below 800/s at the 8th empty bucket (+650ms, the
		// traffic stopped mid-bucket); then the 2s hold.
		if demoted != 2650*time.Millisecond {
			t.Errorf("empty node written %v after the traffic stopped, want 2.65s", demoted)
		}
		if removed-demoted != 3*time.Second {
			t.Errorf("node removed %v after it went empty, want the TTL 3s", removed-demoted)
		}
		if got := a.Top("app", 10); len(got) != 0 {
			t.Errorf("top after idle = %+v, want none", got)
		}

		// A new promotion, then shutdown: the final state is published
		// before the shard leaves.
		a.Add("app", "z", 5000)
		synctest.Wait()
		n := len(pub.calls())
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		ws = pub.calls()
		if len(ws) != n+1 || !slices.Equal(keysOf(ws[n].shard), []string{"z"}) {
			t.Fatalf("final writes = %+v, want one more node with [z]", ws[n:])
		}
		pub.mu.Lock()
		defer pub.mu.Unlock()
		if pub.leftAt.Before(ws[n].at) {
			t.Error("left membership before the final publication")
		}
		if want := []time.Duration{6 * time.Second}; len(pub.collects) < 7 || pub.collects[0] != want[0] {
			t.Errorf("collect calls = %v over %v, want one every 2s with olderThan 2*TTL", pub.collects, time.Since(start))
		}
	})
}

func TestPublishRetriesAfterFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub := &fakePub{failNext: 2}
		a := mustNew(t, Config{}, pub)
		stop := startRun(t, a)
		start := time.Now()
		a.Add("app", "k", 1000)
		time.Sleep(250 * time.Millisecond)
		ws := pub.calls()
		// Attempts at 0 (fails), 100ms (fails), 200ms (lands).
		if len(ws) != 1 || ws[0].at.Sub(start) != 200*time.Millisecond {
			t.Fatalf("writes = %+v, want one landing at +200ms", ws)
		}
		_ = stop()
	})
}

func TestRestartRebuildsFromOwnNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		pub := &fakePub{load: []*hotset.Shard{
			{App: "app", Shard: "s1", Updated: now.Add(-time.Second).UnixMilli(), TTL: 10000,
				Keys: []hotset.Key{{Key: "live", Rate: 4000, Since: now.Add(-time.Hour).UnixMilli()},
					{Key: "dead", Rate: 2000, Since: now.Add(-time.Hour).UnixMilli()}}},
			{App: "old", Shard: "s1", Updated: now.Add(-time.Minute).UnixMilli(), TTL: 10000,
				Keys: []hotset.Key{{Key: "expired", Rate: 9000}}},
		}}
		a := mustNew(t, Config{}, pub)
		stop := startRun(t, a)
		if st, ok := a.Key("app", "dead"); !ok || !st.Hot || st.Rate != 2000 || !st.Since.Equal(now.Add(-time.Hour)) {
			t.Errorf("restored key = %+v, %v", st, ok)
		}
		if _, ok := a.Key("old", "expired"); ok {
			t.Error("a key of an expired node was restored")
		}
		for range 40 {
			a.Add("app", "live", 400)
			time.Sleep(100 * time.Millisecond)
		}
		live, _ := a.Key("app", "live")
		dead, _ := a.Key("app", "dead")
		if !live.Hot || !live.Since.Equal(now.Add(-time.Hour)) || dead.Hot {
			t.Errorf("after 4s: live %+v, dead %+v; want live hot since the restored time, dead cold", live, dead)
		}
		ws := pub.calls()
		if len(ws) == 0 || !slices.Equal(keysOf(ws[len(ws)-1].shard), []string{"live"}) {
			t.Errorf("writes = %+v, want the last to hold only [live]", ws)
		}
		_ = stop()
	})
}

// heartbeats sends empty partials batches every 100ms for d, as running
// detectors with nothing to report do.
func heartbeats(t *testing.T, a *Aggregator, d time.Duration) {
	t.Helper()
	empty := wire.AppendPartials(nil, &wire.PartialBatch{Source: "d1"})
	for end := time.Now().Add(d); time.Now().Before(end); {
		if _, err := a.apply(empty, time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStallPausesDemotion: when every detector goes silent (a consumer
// group rebalance stops them all), hot keys are not demoted until MaxStall,
// and their rates are not read lower than last published: what was counted
// meanwhile is late, not missing.
func TestStallPausesDemotion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub := &fakePub{}
		a := mustNew(t, Config{MaxStall: 8 * time.Second}, pub)
		stop := startRun(t, a)
		defer stop()
		for range 20 {
			a.Add("app", "k", 300)
			time.Sleep(100 * time.Millisecond)
		}
		if st, _ := a.Key("app", "k"); !st.Hot {
			t.Fatal("k not hot after 2s at 3000/s")
		}
		// Silence: the key holds, at its published rate.
		time.Sleep(7 * time.Second)
		if st, _ := a.Key("app", "k"); !st.Hot || st.Rate < 1000 {
			t.Fatalf("after 7s of silence k = %+v, want hot at the rate last published", st)
		}
		// Past MaxStall the silence is believed: demoted after the hold.
		time.Sleep(3500 * time.Millisecond)
		if st, _ := a.Key("app", "k"); st.Hot {
			t.Fatalf("after MaxStall and the hold k = %+v, want cold", st)
		}
	})
}

// blockPub's Publish waits until release is closed: a ZooKeeper write that
// hangs.
type blockPub struct {
	fakePub
	release chan struct{}
}

func (b *blockPub) Publish(ctx context.Context, s *hotset.Shard) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.fakePub.Publish(ctx, s)
}

// The last-sweep clock advances every bucket and stops while the loop is
// stuck in a write, which is what the stalled-aggregator alert relies on.
func TestLastSweepClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub := &blockPub{release: make(chan struct{})}
		a := mustNew(t, Config{Registerer: prometheus.NewRegistry(), WriteTimeout: time.Hour}, pub)
		stop := startRun(t, a)
		start := time.Now()
		unix := func(d time.Duration) float64 { return float64(start.Add(d).UnixNano()) / 1e9 }

		time.Sleep(350 * time.Millisecond)
		synctest.Wait()
		if got, want := testutil.ToFloat64(a.m.swept), unix(300*time.Millisecond); got != want {
			t.Fatalf("idle: last sweep %v, want %v (the +300ms tick)", got, want)
		}
		a.Add("app", "k", 1000) // its publication blocks the loop
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got, want := testutil.ToFloat64(a.m.swept), unix(300*time.Millisecond); got != want {
			t.Errorf("stuck in a write for 5s: last sweep %v, want %v", got, want)
		}
		close(pub.release)
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		if got, min := testutil.ToFloat64(a.m.swept), unix(5*time.Second); got < min {
			t.Errorf("after the write returned: last sweep %v, want >= %v", got, min)
		}
		_ = stop()
	})
}

// TestPromotionNotHeldByRenewal: a promotion right after a rewrite of the
// same node for its rates (a rate refresh or a renewal) is written at once;
// only changes of the hot set wait PublishInterval for each other.
func TestPromotionNotHeldByRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub := &fakePub{}
		a := mustNew(t, Config{Renew: time.Second}, pub)
		stop := startRun(t, a)
		start := time.Now()

		time.Sleep(50 * time.Millisecond)
		a.Add("app", "a", 1000)
		// Wait for the next write of a's node: a rate refresh or a renewal.
		var ws []pubCall
		for len(ws) < 2 && time.Since(start) < 3*time.Second {
			time.Sleep(time.Millisecond)
			ws = pub.calls()
		}
		if len(ws) != 2 {
			t.Fatalf("writes %+v, want the promotion of a and one rewrite of its node", ws)
		}
		time.Sleep(10 * time.Millisecond)
		at := time.Now() // within PublishInterval of the rewrite
		a.Add("app", "b", 2000)
		synctest.Wait()
		ws = pub.calls()
		if len(ws) != 3 || !ws[2].at.Equal(at) || !slices.Equal(keysOf(ws[2].shard), []string{"b", "a"}) {
			t.Fatalf("writes %+v, want b's promotion written at once, %v after the rewrite", ws, at.Sub(ws[1].at))
		}
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}
