package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/hotwatch"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
	"github.com/hotspot-dev/hotspot/internal/zkgroup"
)

// TestHotKeysRuleAndKind publishes a shard node with keys of each kind, and
// a pin, on the real ZooKeeper, follows it with hotwatch as hotspotd does,
// and checks that /v1/hotkeys and /v1/hotkeys/{key} show each key's rule
// (absent for the pin) and kind.
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

	h, err := New(Config{HotSet: w.Snapshot, Aggregators: noAggregators{}})
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
		key  string
		rule any // float64 as JSON numbers decode, nil when absent
		kind string
	}{
		{"item:1", 0.0, "count"},
		{"blob:1", 2.0, "bytes"},
		{"counter:1", 3.0, "write"},
		{"old", -1.0, "count"},
		{"pinned:1", nil, "count"},
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
	}

	var st KeyStatus
	getJSON("/v1/hotkeys/counter:1?app=shop", &st)
	if !st.Hot || st.Rule == nil || *st.Rule != 3 || st.Kind != "write" {
		t.Errorf("/v1/hotkeys/counter:1 = %+v, want hot, rule 3, kind write", st)
	}
	var all AllHotKeys
	getJSON("/v1/hotkeys", &all)
	if len(all.Apps) != 1 || len(all.Apps[0].HotKeys) != 5 || all.Apps[0].HotKeys[0].Kind != "count" || *all.Apps[0].HotKeys[0].Rule != 0 {
		t.Errorf("/v1/hotkeys = %+v, want shop's 5 keys, item:1 first with rule 0, kind count", all)
	}
}
