package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/hotspotapi"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
	"github.com/hotspot-dev/hotspot/shardapi"
)

// effectAggregators answers Key with item:1's sources and effect, and
// Effects with item:1's and blob:1's effect, counting the Effects calls.
type effectAggregators struct {
	noAggregators
	mu    sync.Mutex // guards calls
	calls int
}

var item1Effect = shardapi.EffectRates{L1Hits: 2700, L2Reads: 200, SourceLoads: 20, Limited: 100}

func (f *effectAggregators) Key(_ context.Context, app, key string) (shardapi.KeyState, bool, error) {
	if app != "shop" || key != "item:1" {
		return shardapi.KeyState{}, false, nil
	}
	e := item1Effect
	return shardapi.KeyState{App: app, Key: key, Rate: 950, Hot: true, Sources: []shardapi.SourceShare{{Source: "web-1", Share: 0.7}, {Source: "web-2", Share: 0.2}},
		DistinctSources: 12, Effect: &e}, true, nil
}

func (f *effectAggregators) Effects(_ context.Context, app string) ([]shardapi.KeyEffectRates, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	keys := []shardapi.KeyEffectRates{
		{App: "shop", Key: "item:1", Effect: item1Effect},
		{App: "shop", Key: "blob:1", Effect: shardapi.EffectRates{SourceLoads: 3}}, // no reads: no served_l1
		{App: "other", Key: "item:1", Effect: shardapi.EffectRates{L1Hits: 1}},
	}
	if app != "" {
		keys = slices.DeleteFunc(keys, func(k shardapi.KeyEffectRates) bool { return k.App != app })
	}
	return keys, nil
}

// TestHotKeysRuleAndKind publishes a shard node with keys of each kind, and
// a pin, on the real ZooKeeper, follows it with hotwatch as hotspotd does,
// and checks that /v1/hotkeys and /v1/hotkeys/{key} show each key's rule
// (absent for the pin) and kind, and its sources and effect: served_l1 in
// the list for the keys with reads reported, sources, distinct_sources and
// effect for one key.
func TestHotKeysRuleAndKind(t *testing.T) {
	addr := stacktest.ZK(t)
	root := "/" + stacktest.Name(t)
	conn, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rule := func(i int) *int { return &i }
	now := time.Now().UnixMilli()
	shard := &hotset.Shard{App: "shop", Shard: "agg-1", Updated: now, TTL: 60_000, Keys: []hotset.Key{
		{Key: "item:1", Rate: 900, Since: now, Rule: rule(0), Kind: "count"},
		{Key: "blob:1", Rate: 800, Since: now, Rule: rule(2), Kind: "bytes"},
		{Key: "counter:1", Rate: 700, Since: now, Rule: rule(3), Kind: "write"},
		{Key: "old", Rate: 600, Since: now, Rule: rule(-1)}, // kind left out: count
	}}
	pins := &hotset.Shard{App: "shop", Shard: hotset.PinsNode, Updated: now, TTL: hotset.PinTTL, Keys: []hotset.Key{
		{Key: "pinned:1", Since: now, Source: "pinned"},
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

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sess, err := zkgroup.Connect(ctx, []string{addr}, zkgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	w, err := hotwatch.New(sess, hotwatch.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(wctx) })
	defer wg.Wait()
	defer stop()
	for len(w.Snapshot().App("shop")) < 5 {
		if ctx.Err() != nil {
			t.Fatalf("hot set not read: %v", w.Snapshot().App("shop"))
		}
		time.Sleep(10 * time.Millisecond)
	}

	aggs := &effectAggregators{}
	h, err := New(Config{HotSet: w.Snapshot, Aggregators: aggs})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	getJSON := func(path string, v any) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %s", path, resp.Status, b)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, b)
		}
		return string(b)
	}

	// The raw JSON, to see which fields are present.
	var raw struct {
		HotKeys []map[string]any `json:"hotkeys"`
	}
	body := getJSON("/v1/hotkeys?app=shop", &raw)
	tests := []struct {
		key      string
		rule     any // float64 as JSON numbers decode, nil when absent
		kind     string
		servedL1 any
	}{
		{"item:1", 0.0, "count", 0.9},
		{"blob:1", 2.0, "bytes", nil},
		{"counter:1", 3.0, "write", nil},
		{"old", -1.0, "count", nil},
		{"pinned:1", nil, "count", nil},
	}
	byKey := map[string]map[string]any{}
	for _, k := range raw.HotKeys {
		byKey[k["key"].(string)] = k
	}
	for _, tt := range tests {
		k, ok := byKey[tt.key]
		if !ok {
			t.Errorf("/v1/hotkeys has no %q:\n%s", tt.key, body)
			continue
		}
		rule, hasRule := k["rule"]
		if (tt.rule == nil) == hasRule || hasRule && rule != tt.rule {
			t.Errorf("%s: rule %v (present %v), want %v", tt.key, rule, hasRule, tt.rule)
		}
		if k["kind"] != tt.kind {
			t.Errorf("%s: kind %v, want %q", tt.key, k["kind"], tt.kind)
		}
		if f, ok := k["served_l1"]; (tt.servedL1 == nil) == ok || ok && math.Abs(f.(float64)-tt.servedL1.(float64)) > 1e-9 {
			t.Errorf("%s: served_l1 %v (present %v), want %v", tt.key, f, ok, tt.servedL1)
		}
	}
	// Asked again within a second, the list reuses the shards' answer.
	for range 5 {
		getJSON("/v1/hotkeys?app=shop", &raw)
	}
	aggs.mu.Lock()
	calls := aggs.calls
	aggs.mu.Unlock()
	if calls > 2 { // 1, or 2 on a machine so slow that the six took over a second
		t.Errorf("6 lists in a row asked the shards for effects %d times, want 1", calls)
	}
	var item1 map[string]any
	one := getJSON("/v1/hotkeys/item:1?app=shop", &item1)
	for _, frag := range []string{
		`"sources": [
    {
      "source": "web-1",
      "share": 0.7
    },`,
		`"distinct_sources": 12,`,
		`"effect": {
    "l1_hits": 2700,
    "l2_reads": 200,
    "source_loads": 20,
    "limited": 100
  }`,
	} {
		if !strings.Contains(one, frag) {
			t.Errorf("/v1/hotkeys/item:1 lacks %s:\n%s", frag, one)
		}
	}
	if one := getJSON("/v1/hotkeys/old?app=shop", &item1); strings.Contains(one, "sources") || strings.Contains(one, "effect") {
		t.Errorf("/v1/hotkeys/old, without state at the shards, = %s; want no sources or effect", one)
	}

	var st hotspotapi.KeyStatus
	getJSON("/v1/hotkeys/counter:1?app=shop", &st)
	if !st.Hot || st.Rule == nil || *st.Rule != 3 || st.Kind != "write" {
		t.Errorf("/v1/hotkeys/counter:1 = %+v, want hot, rule 3, kind write", st)
	}
	var all hotspotapi.AllHotKeys
	getJSON("/v1/hotkeys", &all)
	if len(all.Apps) != 1 || len(all.Apps[0].HotKeys) != 5 || all.Apps[0].HotKeys[0].Kind != "count" || *all.Apps[0].HotKeys[0].Rule != 0 ||
		all.Apps[0].HotKeys[0].ServedL1 == nil || math.Abs(*all.Apps[0].HotKeys[0].ServedL1-0.9) > 1e-9 {
		t.Errorf("/v1/hotkeys = %+v, want shop's 5 keys, item:1 first with rule 0, kind count, served_l1 0.9", all)
	}
}
