package httpapi

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/history"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/webhook"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/rules"
	"github.com/hotspot-dev/hotspot/shardapi"
)

var update = flag.Bool("update", false, "rewrite testdata/wire.golden from the answers")

// wireAggregators answers every aggregator call with fixed figures.
type wireAggregators struct{ effectAggregators }

func (*wireAggregators) Top(_ context.Context, app string, n int) ([]shardapi.KeyState, error) {
	return []shardapi.KeyState{{App: app, Key: "item:1", Rate: 950, Hot: true}, {App: app, Key: "item:2", Rate: 12.5}}, nil
}

func (*wireAggregators) Instances(ctx context.Context, app string) ([]shardapi.InstanceEffectRates, error) {
	return instanceAggregators{}.Instances(ctx, app)
}

// wireHistory answers every query with a promotion (with sources) and a
// demotion.
type wireHistory struct{}

func (wireHistory) Query(_ context.Context, q history.Query) (hotspotapi.History, error) {
	at := time.UnixMilli(1_764_514_800_123).UTC()
	return hotspotapi.History{App: q.App, Truncated: true, Events: []hotspotapi.HistoryEvent{
		{At: at.Add(time.Second), Key: "item:1", Kind: "demoted", Rate: 10, Rule: 0},
		{At: at, Key: "item:1", Kind: "promoted", Rate: 1500.5, Rule: -1,
			Sources: []hotspotapi.SourceShare{{Source: "web-1", Share: 0.75}}},
	}}, nil
}

// wireRules keeps one list of app shop.
type wireRules struct{}

func (wireRules) Get(_ context.Context, app string) (*rules.List, error) {
	if app != "shop" {
		return &rules.List{App: app, Rules: []rules.Rule{}}, nil
	}
	return &rules.List{App: app, Version: 3, Rules: []rules.Rule{{Match: "prefix", Pattern: "item:", Threshold: 500, Window: 2 * time.Second}}}, nil
}

func (wireRules) Put(_ context.Context, l *rules.List) (*rules.List, error) {
	c := *l
	c.Version++
	return &c, nil
}

func (wireRules) Delete(context.Context, string, int64) error { return nil }

// TestWireFormat pins the public API's answers byte for byte
// (testdata/wire.golden): a hot set published in the real ZooKeeper, and
// fakes for the aggregators, history, lists, rules and webhooks. Run with
// -update after a deliberate change of the API.
func TestWireFormat(t *testing.T) {
	snap := wireHotSet(t)
	ev := NewEvents(10)
	at := time.UnixMilli(1_764_514_800_000)
	ev.Record(hotwatch.Change{App: "shop", At: at, Added: []hotset.Key{{Key: "item:1", Rate: 1200}}})
	ev.Record(hotwatch.Change{App: "shop", At: at.Add(time.Second), Removed: []string{"item:0"}})
	lists := &fakeLists{lists: map[string][]string{"pins/shop": {"item:1", "item:9"}}}
	hooks := &fakeWebhooks{subs: map[string][]webhook.Subscription{"shop": {{Name: "ops", URL: "https://example.com/h", Secret: "s"}}}}
	h, err := New(Config{HotSet: snap, Aggregators: &wireAggregators{}, Events: ev, Threshold: 1000, Topic: "hotspot.access",
		Lists: lists, Rules: wireRules{}, AdminToken: "tok", History: wireHistory{}, Webhooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct{ method, target, body string }{
		{"GET", "/v1/hotkeys?app=shop", ""},
		{"GET", "/v1/hotkeys", ""},
		{"GET", "/v1/hotkeys/item:1?app=shop", ""},
		{"GET", "/v1/hotkeys/nope?app=shop", ""},
		{"GET", "/v1/hotkeys/item:1", ""},
		{"GET", "/v1/top?app=shop&n=2", ""},
		{"GET", "/v1/top?app=shop&n=0", ""},
		{"GET", "/v1/instances", ""},
		{"GET", "/v1/events?app=shop", ""},
		{"GET", "/v1/history?app=shop", ""},
		{"GET", "/v1/config", ""},
		{"GET", "/v1/pins?app=shop", ""},
		{"GET", "/v1/blocks?app=shop", ""},
		{"PUT", "/v1/pins/item:2?app=shop", ""},
		{"DELETE", "/v1/blocks/item:2?app=shop", ""},
		{"GET", "/v1/rules?app=shop", ""},
		{"GET", "/v1/rules?app=web", ""},
		{"PUT", "/v1/rules?app=shop", `{"version": 3, "rules": [{"match": "exact", "pattern": "a"}]}`},
		{"PUT", "/v1/rules?app=shop", `{"version": 3, "rules": [{"match": "exact"}]}`},
		{"DELETE", "/v1/rules?app=shop&version=4", ""},
		{"GET", "/v1/webhooks?app=shop", ""},
		{"PUT", "/v1/webhooks/dev?app=shop", `{"url": "https://example.com/d"}`},
		{"GET", "/v1/webhooks?app=shop", ""},
		{"GET", "/healthz", ""},
		{"GET", "/readyz", ""},
	}
	var got bytes.Buffer
	for _, c := range calls {
		req := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
		if c.method != "GET" || strings.HasPrefix(c.target, "/v1/webhooks") {
			req.Header.Set("Authorization", "Bearer tok")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		fmt.Fprintf(&got, "== %s %s: %d %s\n%s\n", c.method, c.target, rec.Code, rec.Header().Get("Content-Type"), body)
	}
	const golden = "testdata/wire.golden"
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("the API's answers are not those of %s:\n%s", golden, got.String())
	}
}

// wireHotSet publishes app shop's hot keys (every kind, a rule each, a pin)
// in the real ZooKeeper and returns the hot set as hotwatch follows it.
func wireHotSet(t *testing.T) func() *hotwatch.Snapshot {
	addr := stacktest.ZK(t)
	root := "/" + stacktest.Name(t)
	conn, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	rule := func(i int) *int { return &i }
	now := time.Now().UnixMilli()
	since := int64(1_764_514_800_456)
	shard := &hotset.Shard{App: "shop", Shard: "agg-1", Updated: now, TTL: 600_000, Keys: []hotset.Key{
		{Key: "item:1", Rate: 900, Since: since, Rule: rule(0), Kind: "count"},
		{Key: "blob:1", Rate: 800.25, Since: since, Rule: rule(2), Kind: "bytes"},
		{Key: "counter:1", Rate: 700, Since: since, Rule: rule(3), Kind: "write"},
		{Key: "old", Rate: 600, Since: since, Rule: rule(-1)},
	}}
	pins := &hotset.Shard{App: "shop", Shard: hotset.PinsNode, Updated: now, TTL: hotset.PinTTL, Keys: []hotset.Key{
		{Key: "pinned:1", Since: since, Source: "pinned"},
	}}
	for _, p := range []string{root, hotset.HotDir(root), hotset.AppDir(root, "shop")} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*hotset.Shard{shard, pins} {
		b, err := hotset.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Create(hotset.ShardPath(root, "shop", s.Shard), b, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range []string{"agg-1", hotset.PinsNode} {
			_ = conn.Delete(hotset.ShardPath(root, "shop", s), -1)
		}
		for _, p := range []string{hotset.AppDir(root, "shop"), hotset.HotDir(root), root} {
			_ = conn.Delete(p, -1)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sess, err := zkgroup.Connect(ctx, []string{addr}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	w, err := hotwatch.New(sess, hotwatch.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(wctx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	for len(w.Snapshot().App("shop")) < 5 {
		if ctx.Err() != nil {
			t.Fatalf("hot set not read: %v", w.Snapshot().App("shop"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return w.Snapshot
}
