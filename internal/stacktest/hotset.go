package stacktest

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hotspot-dev/hotspot/hotset"
)

// HotSet writes one shard node of an app's hot set in ZooKeeper, as an
// aggregator would, under a root and an app named after the test (Name);
// everything it created is deleted when the test ends.
type HotSet struct {
	Root, App string

	t    testing.TB
	conn *zk.Conn
}

// NewHotSet returns the test's HotSet, on the ZooKeeper at zkAddr, with an
// empty hot set.
func NewHotSet(t testing.TB, zkAddr string) *HotSet {
	t.Helper()
	conn, _, err := zk.Connect([]string{zkAddr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	name := Name(t)
	h := &HotSet{Root: "/" + name, App: name, t: t, conn: conn}
	for _, dir := range []string{h.Root, hotset.HotDir(h.Root), hotset.AppDir(h.Root, h.App)} {
		if _, err := conn.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		p := hotset.AppDir(h.Root, h.App)
		children, _, _ := conn.Children(p)
		for _, c := range children {
			_ = conn.Delete(p+"/"+c, -1)
		}
		for _, d := range []string{p, hotset.HotDir(h.Root), h.Root} {
			_ = conn.Delete(d, -1)
		}
		conn.Close()
	})
	return h
}

// Set makes keys the hot set, each at 5,000/s.
func (h *HotSet) Set(keys ...string) {
	h.t.Helper()
	ks := make([]hotset.Key, len(keys))
	for i, k := range keys {
		ks[i] = hotset.Key{Key: k, Rate: 5000, Since: time.Now().UnixMilli()}
	}
	h.SetKeys(ks...)
}

// SetKeys makes keys, as given (rule and kind included), the hot set: one
// shard node, "agg-1", with a TTL of 60 s.
func (h *HotSet) SetKeys(keys ...hotset.Key) {
	h.t.Helper()
	s := &hotset.Shard{App: h.App, Shard: "agg-1", Updated: time.Now().UnixMilli(), TTL: 60_000, Keys: keys}
	b, err := hotset.Encode(s)
	if err != nil {
		h.t.Fatal(err)
	}
	p := hotset.ShardPath(h.Root, h.App, "agg-1")
	if _, err := h.conn.Set(p, b, -1); errors.Is(err, zk.ErrNoNode) {
		if _, err = h.conn.Create(p, b, 0, zk.WorldACL(zk.PermAll)); err != nil {
			h.t.Fatal(err)
		}
	} else if err != nil {
		h.t.Fatal(err)
	}
}
