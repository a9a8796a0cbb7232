package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
	"github.com/hotspot-dev/hotspot/internal/stacktest"
)

// TestPromotedItemStopsReachingTheSource runs itemapp against the real
// ZooKeeper and Redis, publishes item:1 as hot the way an aggregator does,
// and checks that reads of it then stay in the app.
func TestPromotedItemStopsReachingTheSource(t *testing.T) {
	zkAddr, redisAddr := stacktest.ZK(t), stacktest.Redis(t)
	name := stacktest.Name(t)
	root := "/" + name
	base := startApp(t, "--app", name, "--zk", zkAddr, "--zk-root", root, "--redis", redisAddr,
		"--redis-prefix", name+":", "--brokers", "")

	conn, _, err := zk.Connect([]string{zkAddr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	shard := hotset.ShardPath(root, name, "agg-1")
	b, err := hotset.Encode(&hotset.Shard{App: name, Shard: "agg-1", Updated: time.Now().UnixMilli(), TTL: 60_000,
		Keys: []hotset.Key{{Key: "item:1", Rate: 5000}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, hotset.HotDir(root), hotset.AppDir(root, name)} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Create(shard, b, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range []string{shard, hotset.AppDir(root, name), hotset.HotDir(root), root} {
			_ = conn.Delete(p, -1)
		}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, h := do(t, "GET", base+"/item/1", "")
		if code == 200 && h.Get("X-Hot") == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("item:1 not served as hot (last status %d)", code)
		}
		time.Sleep(5 * time.Millisecond)
	}
	reads := func() int64 {
		_, body, _ := do(t, "GET", base+"/stats", "")
		var st struct {
			SourceReads int64 `json:"source_reads"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		return st.SourceReads
	}
	before := reads()
	for range 200 {
		if code, body, _ := do(t, "GET", base+"/item/1", ""); code != 200 || body != `{"id":1,"name":"item 1"}` {
			t.Fatalf("GET /item/1 = %d %q", code, body)
		}
	}
	if got := reads() - before; got != 0 {
		t.Errorf("200 reads of a hot item reached the source %d times, want 0", got)
	}
}
